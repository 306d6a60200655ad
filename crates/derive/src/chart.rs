//! A chart per project: daily human and AI views, their 7-day averages, and the 7-day AI share
//! on a second axis; provisional days are shaded. Complete days only, as every table and
//! summary counts them: today (not over) is never drawn, so no line plunges at its end. PNG and SVG, drawn with plotters and an
//! embedded font (DejaVu Sans), so nothing depends on the machine's fonts.

use super::TrendsError;
use chrono::NaiveDate;
use plotters::coord::Shift;
use plotters::prelude::*;
use polars::prelude::*;
use std::path::{Path, PathBuf};

/// Chart size in pixels.
pub const SIZE: (u32, u32) = (1200, 620);

/// One project's daily series.
#[derive(Debug, Clone, Default)]
pub struct Series {
    /// Days.
    pub days: Vec<NaiveDate>,
    /// Human views.
    pub human: Vec<f64>,
    /// AI views.
    pub ai: Vec<f64>,
    /// 7-day average of human views (None where fewer than 7 days of the window were
    /// exported: an average of fewer days would read as a dip or a jump).
    pub human_avg: Vec<Option<f64>>,
    /// 7-day average of AI views (None likewise).
    pub ai_avg: Vec<Option<f64>>,
    /// 7-day AI share in percent (None without views, or without the 7 days).
    pub share: Vec<Option<f64>>,
    /// Provisional days.
    pub provisional: Vec<bool>,
}

fn register_font() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let _ = plotters::style::register_font(
            "sans-serif",
            FontStyle::Normal,
            dejavu::sans::regular(),
        );
    });
}

/// The series of every project in the daily table.
pub fn series(daily: &DataFrame) -> Result<Vec<(String, Series)>, TrendsError> {
    let project = daily.column("project")?.str()?.clone();
    let date = daily.column("date")?.cast(&DataType::Int32)?;
    let date = date.i32()?.clone();
    let num = |name: &str| -> Result<Float64Chunked, TrendsError> {
        Ok(daily.column(name)?.cast(&DataType::Float64)?.f64()?.clone())
    };
    let (human, ai, h7, a7, share) = (
        num("human")?,
        num("ai")?,
        num("human_7d")?,
        num("ai_7d")?,
        num("ai_share_7d")?,
    );
    let provisional = daily.column("provisional")?.bool()?.clone();
    let complete = daily.column("complete")?.bool()?.clone();
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
    let mut out: Vec<(String, Series)> = Vec::new();
    for i in 0..daily.height() {
        let (Some(p), Some(d)) = (project.get(i), date.get(i)) else {
            continue;
        };
        if complete.get(i) != Some(true) {
            continue;
        }
        if out.last().is_none_or(|(name, _)| name != p) {
            out.push((p.to_string(), Series::default()));
        }
        let Some((_, s)) = out.last_mut() else {
            continue;
        };
        let day = epoch + chrono::Duration::days(i64::from(d));
        // Drawn only where the 7 days of the window were all exported.
        let whole = s
            .days
            .iter()
            .rev()
            .take_while(|x| (day - **x).num_days() < 7)
            .count()
            + 1
            == 7;
        let week = |v: Option<f64>| v.filter(|_| whole);
        s.days.push(day);
        s.human.push(human.get(i).unwrap_or(0.0));
        s.ai.push(ai.get(i).unwrap_or(0.0));
        s.human_avg.push(week(h7.get(i)).map(|v| v / 7.0));
        s.ai_avg.push(week(a7.get(i)).map(|v| v / 7.0));
        s.share.push(week(share.get(i)).map(|v| v * 100.0));
        s.provisional.push(provisional.get(i).unwrap_or(false));
    }
    Ok(out)
}

/// The days a chart spans, `first..last` (a single day widened to two, so the axis has a
/// width); none without days.
fn x_range(days: impl Iterator<Item = NaiveDate> + Clone) -> Option<(NaiveDate, NaiveDate)> {
    let (first, last) = (days.clone().min()?, days.max()?);
    let last = if last == first {
        last.succ_opt().unwrap_or(last)
    } else {
        last
    };
    Some((first, last))
}

/// Draws the series labels in the upper left corner, over the lines but letting them show.
fn legend<'a, DB, X, Y>(chart: &mut ChartContext<'a, DB, Cartesian2d<X, Y>>) -> Result<(), String>
where
    DB: DrawingBackend + 'a,
    DB::ErrorType: 'static,
    X: Ranged,
    Y: Ranged,
{
    chart
        .configure_series_labels()
        .label_font(("sans-serif", 15))
        .background_style(WHITE.mix(0.7))
        .border_style(BLACK.mix(0.4))
        .position(SeriesLabelPosition::UpperLeft)
        .draw()
        .map_err(|e| e.to_string())
}

#[expect(clippy::too_many_lines)]
fn draw<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    project: &str,
    s: &Series,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let Some((first, last)) = x_range(s.days.iter().copied()) else {
        return Ok(());
    };
    // Headroom above the data for the legend.
    let top = s.human.iter().chain(&s.ai).fold(1.0f64, |m, v| m.max(*v)) * 1.5;
    let human = RGBColor(31, 119, 180);
    let ai = RGBColor(214, 39, 40);
    let share = RGBColor(90, 90, 90);
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{project}: page views per day, human and AI"),
            ("sans-serif", 26),
        )
        .margin(16)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .right_y_label_area_size(70)
        .build_cartesian_2d(first..last, 0f64..top)
        .map_err(err)?
        .set_secondary_coord(first..last, 0f64..100f64);
    chart
        .configure_mesh()
        .x_labels(10)
        .x_label_formatter(&|d| d.format("%b %d").to_string())
        .y_desc("views per day")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    chart
        .configure_secondary_axes()
        .y_desc("AI share, 7 days (%)")
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    if let Some(start) = s
        .days
        .iter()
        .zip(&s.provisional)
        .find(|(_, p)| **p)
        .map(|(d, _)| *d)
    {
        let shade = RGBColor(200, 200, 200).mix(0.35).filled();
        chart
            .draw_series(std::iter::once(Rectangle::new(
                [(start, 0.0), (last, top)],
                shade,
            )))
            .map_err(err)?
            .label("provisional (may still change)")
            .legend(|(x, y)| {
                Rectangle::new(
                    [(x, y - 6), (x + 18, y + 6)],
                    RGBColor(200, 200, 200).filled(),
                )
            });
    }
    let points = |v: Vec<Option<f64>>| {
        s.days
            .iter()
            .copied()
            .zip(v)
            .filter_map(|(d, v)| Some((d, v?)))
            .collect::<Vec<_>>()
    };
    let daily = |v: &[f64]| v.iter().map(|x| Some(*x)).collect::<Vec<_>>();
    for (values, color, width, label) in [
        (daily(&s.human), human.mix(0.35), 1, "human, daily"),
        (daily(&s.ai), ai.mix(0.35), 1, "AI, daily"),
        (
            s.human_avg.clone(),
            human.mix(1.0),
            3,
            "human, 7-day average",
        ),
        (s.ai_avg.clone(), ai.mix(1.0), 3, "AI, 7-day average"),
    ] {
        let style = color.stroke_width(width);
        chart
            .draw_series(LineSeries::new(points(values), style))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    }
    let share_points: Vec<(NaiveDate, f64)> = s
        .days
        .iter()
        .zip(&s.share)
        .filter_map(|(d, v)| v.map(|v| (*d, v)))
        .collect();
    let dashed = share.stroke_width(2);
    chart
        .draw_secondary_series(LineSeries::new(share_points, dashed))
        .map_err(err)?
        .label("AI share, 7 days (right axis)")
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], dashed));
    legend(&mut chart)?;
    root.present().map_err(err)
}

/// A chart drawn on any backend (PNG or SVG), one per project.
trait Chart {
    /// The file name's prefix: `<prefix>-<project>.png`.
    const PREFIX: &'static str;
    /// Draws the project's chart.
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        project: &str,
    ) -> Result<(), String>
    where
        DB::ErrorType: 'static;
}

impl Chart for Series {
    const PREFIX: &'static str = "chart";
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        project: &str,
    ) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        draw(root, project, self)
    }
}

/// Writes `trends/<prefix>-<project>.png` and `.svg` for every project; returns the files.
fn write_each<C: Chart>(
    out: &Path,
    charts: impl IntoIterator<Item = (String, C)>,
) -> Result<Vec<PathBuf>, TrendsError> {
    register_font();
    let dir = out.join("trends");
    let mut written = Vec::new();
    for (project, c) in charts {
        let name = docpipe_catalog::layout::escape_partition_value(&project).replace('%', "_");
        let png = dir.join(format!("{}-{name}.png", C::PREFIX));
        let svg = dir.join(format!("{}-{name}.svg", C::PREFIX));
        let fail = |path: &Path, message: String| TrendsError::Io {
            path: path.display().to_string(),
            source: std::io::Error::other(message),
        };
        c.draw_on(
            &BitMapBackend::new(&png, SIZE).into_drawing_area(),
            &project,
        )
        .map_err(|m| fail(&png, m))?;
        c.draw_on(&SVGBackend::new(&svg, SIZE).into_drawing_area(), &project)
            .map_err(|m| fail(&svg, m))?;
        written.push(png);
        written.push(svg);
    }
    Ok(written)
}

/// Writes `trends/chart-<project>.png` and `.svg` for every project; returns the files.
pub fn write_charts(out: &Path, daily: &DataFrame) -> Result<Vec<PathBuf>, TrendsError> {
    write_each(out, series(daily)?)
}

/// A project's docs-gap series: `(day, percent)` points of each line.
#[derive(Debug, Clone, Default)]
pub struct GapSeries {
    /// Searches without a click, per day.
    pub unclicked: Vec<(NaiveDate, f64)>,
    /// Assistant turns unanswered, per day.
    pub unanswered: Vec<(NaiveDate, f64)>,
    /// Assistant turns answered with a clarifying question, per day.
    pub clarifying: Vec<(NaiveDate, f64)>,
}

/// `(project, day, share)` of a table's share column, complete days only (days without the
/// share left out).
fn shares(df: &DataFrame, column: &str) -> Result<Vec<(String, NaiveDate, f64)>, TrendsError> {
    let project = df.column("project")?.str()?.clone();
    let complete = df.column("complete")?.bool()?.clone();
    let date = df.column("date")?.cast(&DataType::Int32)?;
    let date = date.i32()?.clone();
    let value = df.column(column)?.cast(&DataType::Float64)?;
    let value = value.f64()?.clone();
    let epoch = NaiveDate::from_ymd_opt(1970, 1, 1).unwrap_or_default();
    Ok((0..df.height())
        .filter(|i| complete.get(*i) == Some(true))
        .filter_map(|i| {
            Some((
                project.get(i)?.to_string(),
                epoch + chrono::Duration::days(i64::from(date.get(i)?)),
                value.get(i)? * 100.0,
            ))
        })
        .collect())
}

/// The gap series of every project with searches or assistant turns.
pub fn gap_series(
    gaps: &super::gaps::Gaps,
) -> Result<std::collections::BTreeMap<String, GapSeries>, TrendsError> {
    let mut out: std::collections::BTreeMap<String, GapSeries> = Default::default();
    for (p, d, v) in shares(&gaps.search_daily, "unclicked_share")? {
        out.entry(p).or_default().unclicked.push((d, v));
    }
    for (p, d, v) in shares(&gaps.assistant_daily, "unanswered_share")? {
        out.entry(p).or_default().unanswered.push((d, v));
    }
    for (p, d, v) in shares(&gaps.assistant_daily, "clarifying_share")? {
        out.entry(p).or_default().clarifying.push((d, v));
    }
    Ok(out)
}

fn draw_gaps<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    project: &str,
    s: &GapSeries,
) -> Result<(), String>
where
    DB::ErrorType: 'static,
{
    let err = |e: DrawingAreaErrorKind<DB::ErrorType>| e.to_string();
    root.fill(&WHITE).map_err(err)?;
    let days = s
        .unclicked
        .iter()
        .chain(&s.unanswered)
        .chain(&s.clarifying)
        .map(|(d, _)| *d);
    let Some((first, last)) = x_range(days) else {
        return Ok(());
    };
    let mut chart = ChartBuilder::on(root)
        .caption(
            format!("{project}: searches without a click and unanswered questions"),
            ("sans-serif", 26),
        )
        .margin(16)
        // Room for the last day's label, centred on the axis's end.
        .margin_right(48)
        .x_label_area_size(44)
        .y_label_area_size(80)
        .build_cartesian_2d(first..last, 0f64..100f64)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(10)
        .x_label_formatter(&|d| d.format("%b %d").to_string())
        .y_desc("share per day (%)")
        .y_label_formatter(&|v| format!("{v:.0}"))
        .label_style(("sans-serif", 15))
        .draw()
        .map_err(err)?;
    for (points, color, label) in [
        (
            &s.unclicked,
            RGBColor(31, 119, 180),
            "searches without a click",
        ),
        (
            &s.unanswered,
            RGBColor(214, 39, 40),
            "assistant: unanswered",
        ),
        (
            &s.clarifying,
            RGBColor(255, 127, 14),
            "assistant: clarifying question",
        ),
    ] {
        let style = color.stroke_width(2);
        chart
            .draw_series(LineSeries::new(points.iter().copied(), style))
            .map_err(err)?
            .label(label)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], style));
    }
    legend(&mut chart)?;
    root.present().map_err(err)
}

impl Chart for GapSeries {
    const PREFIX: &'static str = "gaps";
    fn draw_on<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        project: &str,
    ) -> Result<(), String>
    where
        DB::ErrorType: 'static,
    {
        draw_gaps(root, project, self)
    }
}

/// Writes `trends/gaps-<project>.png` and `.svg` for every project with searches or
/// assistant turns; returns the files.
pub fn write_gap_charts(out: &Path, gaps: &super::gaps::Gaps) -> Result<Vec<PathBuf>, TrendsError> {
    write_each(out, gap_series(gaps)?)
}
