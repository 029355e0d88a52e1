//! cgroup v1/v2 (placeholder).
