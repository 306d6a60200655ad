//! Generated data shared by the trends benches (a folder of its own: cargo does not take it
//! for a bench).

use docpipe::api::views::{Counts, Rows, ViewRow};
use docpipe::random::{mix, unit};

/// Day `d` of `days` of generated page views over `paths` (a long tail, the AI share growing
/// over the days), mixed with `seed` (a project's): the rows and their totals.
pub fn page_views(paths: &[String], d: i64, days: i64, seed: u64) -> (Rows, Counts) {
    let rows: Rows = paths
        .iter()
        .enumerate()
        .map(|(i, p)| {
            let h = mix(seed ^ (d as u64) << 20 ^ i as u64);
            let total = 1 + (2000.0 / (i as f64 + 1.0) + 10.0 * unit(h)) as i64;
            let ai =
                (total as f64 * (0.1 + 0.4 * d as f64 / days as f64) * unit(mix(h))).round() as i64;
            ViewRow {
                path: p.clone(),
                human: total - ai,
                ai,
                total,
            }
        })
        .collect();
    let totals = rows.iter().fold(Counts::default(), |c, r| Counts {
        human: c.human + r.human,
        ai: c.ai + r.ai,
        total: c.total + r.total,
    });
    (rows, totals)
}
