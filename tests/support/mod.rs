//! What a module's in-process tests and its scenarios share (each tier uses part of it).
#![allow(dead_code)]

pub mod daemon_work;
pub mod datasets;
pub mod export;
pub mod review;
pub mod rules;
