//! A page's views as the service counts them: human readers, AI agents and their total, each a
//! non-negative integer (the page-view decoder, the state's windows and the emulator's truth
//! agree on them).

use serde::{Deserialize, Deserializer, de};

/// A count: a non-negative integer that fits in i64; an integral float such as `12.0` is accepted.
pub fn count<'de, D: Deserializer<'de>>(d: D) -> Result<i64, D::Error> {
    struct V;
    impl de::Visitor<'_> for V {
        type Value = i64;
        fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
            f.write_str("a non-negative integer count")
        }
        fn visit_u64<E: de::Error>(self, v: u64) -> Result<i64, E> {
            i64::try_from(v).map_err(|_| E::custom(format!("count {v} is too large")))
        }
        fn visit_i64<E: de::Error>(self, v: i64) -> Result<i64, E> {
            if v < 0 {
                Err(E::custom(format!("count {v} is negative")))
            } else {
                Ok(v)
            }
        }
        fn visit_f64<E: de::Error>(self, v: f64) -> Result<i64, E> {
            // 2^53: beyond it a float no longer holds every integer.
            if v.is_finite() && v.fract() == 0.0 && (0.0..=9_007_199_254_740_992.0).contains(&v) {
                Ok(v as i64)
            } else {
                Err(E::custom(format!(
                    "count {v} is not a non-negative integer"
                )))
            }
        }
    }
    d.deserialize_any(V)
}

/// Human, AI and total counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Deserialize)]
pub struct Counts {
    /// Human views.
    #[serde(deserialize_with = "count")]
    pub human: i64,
    /// AI views.
    #[serde(deserialize_with = "count")]
    pub ai: i64,
    /// human + ai.
    #[serde(deserialize_with = "count")]
    pub total: i64,
}
