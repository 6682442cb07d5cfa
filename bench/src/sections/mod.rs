//! The benchmark's sections, in the order they run.

pub mod density;
pub mod lifecycle;
pub mod scale;
pub mod snapshots;
pub mod startup;
pub mod syscalls;
pub mod workloads;
