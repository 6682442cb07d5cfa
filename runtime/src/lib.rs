//! cordon: an OCI container runtime whose containers' risky syscalls go to a
//! user-space supervisor (seccomp user notification) that denies, emulates
//! or allows them under a policy, and records each decision.
//!
//! The library does the work; the `cordon` binary only parses and calls.

pub mod abi;
pub mod annotations;
pub mod cgroupv1;
pub mod config;
pub mod container;
pub mod errno;
pub mod filter;
pub mod layout;
pub mod policy;
pub mod supervisor;
pub mod sys;
pub mod views;
