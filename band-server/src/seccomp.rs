//! seccomp (placeholder).
