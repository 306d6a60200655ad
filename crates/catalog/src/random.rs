//! Small deterministic randomness: a SplitMix64 mixer, and a jitter source for backoff.

use std::sync::atomic::{AtomicU64, Ordering};

/// SplitMix64: a small, good, deterministic mixer.
pub fn mix(mut x: u64) -> u64 {
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^ (x >> 31)
}

/// A uniform number in [0, 1) from a hash.
pub fn unit(h: u64) -> f64 {
    (h >> 11) as f64 / (1u64 << 53) as f64
}

/// A stream of uniform numbers in [0, 1), for jitter; seeded per process.
#[derive(Debug)]
pub struct Dice(AtomicU64);

impl Dice {
    /// Dice with a fixed seed.
    pub const fn seeded(seed: u64) -> Self {
        Self(AtomicU64::new(seed))
    }

    /// Dice seeded from the process id and the address of a stack value.
    pub fn from_process() -> Self {
        let local = 0u8;
        let addr = &local as *const u8 as u64;
        Self::seeded(mix(u64::from(std::process::id()) ^ addr.rotate_left(17)))
    }

    /// The next number in [0, 1).
    pub fn next(&self) -> f64 {
        unit(mix(self.0.fetch_add(1, Ordering::Relaxed)))
    }
}
