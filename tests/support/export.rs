//! What the in-process tests and the scenarios of `export` share.

use crate::common::*;
use docpipe::api::Limits;
use docpipe::export::{Exporter, Summary};
use std::path::Path;

pub async fn export(live: &Live, out: &Path, limits: Limits, from: &str, to: &str) -> Summary {
    let exporter = Exporter::open(out, live.clock.clone(), 3).await.unwrap();
    let t = targets(live, limits);
    let plan = exporter.plan(&t, day(from), day(to)).unwrap();
    exporter.run(&t, &plan).await
}
