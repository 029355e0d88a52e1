//! The pure plan of a run's cgroup: its limits, the steps that create it ([`Op`], each write
//! with what a failure means, [`Need`]) and the check of its name. The steps themselves come
//! from the version ([`super::version`]).

use std::path::{Path, PathBuf};

use super::{CgroupError, Hierarchy};

/// The directory under each hierarchy's root that holds every run's cgroup.
pub(super) const PARENT: &str = "band";

/// The limits of one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct CgroupLimits {
    /// Memory limit; swap is limited to zero where the kernel allows.
    pub(crate) memory_bytes: u64,
    /// Maximum number of tasks (processes and threads).
    pub(crate) pids: u64,
    /// CPU time per period, in microseconds. `0` means no CPU limit.
    pub(crate) cpu_quota_us: u64,
    /// The CPU accounting period, in microseconds.
    pub(crate) cpu_period_us: u64,
}

/// What the applier does with a write that fails.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// Any failure is an error.
    Required,
    /// A missing file is skipped (the kernel or controller does not offer it); any other
    /// failure is an error.
    IfExists,
    /// Failures are ignored: the setting is a refinement, not a limit.
    BestEffort,
}

/// One step of creating a run's cgroup.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Op {
    /// `mkdir`; `exist_ok` only for the shared `band` parent.
    Mkdir { path: PathBuf, exist_ok: bool },
    /// v2: enable memory and pids (required) and cpu (if offered) for the children of `dir`.
    EnableControllers { dir: PathBuf },
    Write {
        path: PathBuf,
        value: String,
        need: Need,
    },
}

pub(super) fn write_op(dir: &Path, file: &str, value: impl ToString, need: Need) -> Op {
    Op::Write {
        path: dir.join(file),
        value: value.to_string(),
        need,
    }
}

pub(super) fn validate_name(name: &str) -> Result<(), CgroupError> {
    let reason = if name.is_empty() {
        Some("empty")
    } else if name.len() > 200 {
        Some("longer than 200 bytes")
    } else if name.starts_with('.') {
        Some("starts with a dot")
    } else if !name
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
    {
        Some("only ASCII letters, digits, '-', '_' and '.' are allowed")
    } else {
        None
    };
    match reason {
        Some(reason) => Err(CgroupError::InvalidName {
            name: name.to_string(),
            reason,
        }),
        None => Ok(()),
    }
}

/// How a run's cgroup is created: a pure function of the hierarchy, the name and the limits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CgroupPlan {
    pub(crate) hierarchy: Hierarchy,
    pub(crate) name: String,
    pub ops: Vec<Op>,
}

/// Plan the run's cgroup `name` with `limits` in `h`. Pure.
pub(crate) fn plan(
    h: &Hierarchy,
    name: &str,
    limits: &CgroupLimits,
) -> Result<CgroupPlan, CgroupError> {
    validate_name(name)?;
    Ok(CgroupPlan {
        hierarchy: h.clone(),
        name: name.to_string(),
        ops: h.version().plan_create(name, limits),
    })
}

/// The run's part of [`crate::plan::plan_run`]: the cgroup's steps for the effective limits, on
/// the hierarchy the host's facts found. Pure.
pub(crate) fn plan_run_cgroup(
    run_id: &str,
    limits: &crate::config::EffectiveLimits,
    hierarchy: &Result<Hierarchy, super::CgroupError>,
) -> crate::error::SetupResult<CgroupPlan> {
    use crate::error::LayerExt;
    let hierarchy = hierarchy.as_ref().map_err(|e| {
        crate::error::SetupError::new(
            band::proto::Layer::Cgroup,
            format!("no usable cgroup hierarchy: {e}"),
        )
    })?;
    let limits = CgroupLimits {
        memory_bytes: limits.memory_bytes,
        pids: limits.pids,
        cpu_quota_us: limits.cpu_quota_us,
        cpu_period_us: limits.cpu_period_us,
    };
    plan(hierarchy, run_id, &limits).layer(
        band::proto::Layer::Cgroup,
        "failed to create the run's cgroup",
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::cgroup::RunCgroup;
    use crate::layers::cgroup::fake::{limits, w};
    use pretty_assertions::assert_eq;

    #[test]
    fn zero_cpu_quota_means_unlimited() {
        let unlimited = CgroupLimits {
            cpu_quota_us: 0,
            ..limits()
        };
        let v2 = Hierarchy::V2 { root: "/cg".into() }
            .version()
            .plan_create("r", &unlimited);
        assert_eq!(
            v2.last(),
            Some(&w("/cg/band/r/cpu.max", "max 100000", Need::IfExists))
        );
        let v1 = Hierarchy::V1 {
            memory: "/m".into(),
            pids: "/p".into(),
            cpu: Some("/c".into()),
            freezer: None,
        };
        let v1 = v1.version().plan_create("r", &unlimited);
        assert_eq!(
            v1.last(),
            Some(&w("/c/band/r/cpu.cfs_quota_us", "-1", Need::Required))
        );
    }

    #[test]
    fn invalid_names_are_rejected() {
        let h = Hierarchy::V2 { root: "/cg".into() };
        for name in ["", ".", "..", ".hidden", "a/b", "../x", "a b", "ü"] {
            let err = RunCgroup::open(&h, name).unwrap_err();
            assert!(
                matches!(err, CgroupError::InvalidName { .. }),
                "{name:?}: {err}"
            );
        }
        assert!(RunCgroup::open(&h, "run-2024.01_x").is_ok());
    }
}
