//! What the service promises that both sides of the wire keep: its documented per-hour limits
//! (the client keeps under them, the emulator enforces them).

/// The service's documented per-hour limits.
pub mod limits {
    /// Analytics requests per organization, shared by all analytics calls.
    pub const ANALYTICS_PER_HOUR: u32 = 100;
    /// Follow-ups and job creations per project.
    pub const AGENT_PER_HOUR: u32 = 100;
    /// Assistant messages per organization.
    pub const ASSISTANT_PER_HOUR: u32 = 10_000;

    /// `ANALYTICS_PER_HOUR`, as a serde default.
    pub const fn analytics() -> u32 {
        ANALYTICS_PER_HOUR
    }
    /// `AGENT_PER_HOUR`, as a serde default.
    pub const fn agent() -> u32 {
        AGENT_PER_HOUR
    }
    /// `ASSISTANT_PER_HOUR`, as a serde default.
    pub const fn assistant() -> u32 {
        ASSISTANT_PER_HOUR
    }
}
