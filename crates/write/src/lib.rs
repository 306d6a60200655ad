//! docpipe's write stage: record batches as Parquet partitions (`parquet`: zstd, one file per
//! partition, written under a temporary name and renamed into place), and the one writer of the
//! tables docpipe derives from its state (`derived`), whose text columns may be written from
//! codes (`coded`). The only crate of the workspace that writes Parquet with arrow-rs; it imports
//! the catalogue only (docs/design.md).

pub mod coded;
pub mod derived;
pub mod parquet;
