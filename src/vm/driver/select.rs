//! The one place that picks a [`Driver`] implementation: for a `--driver` kind, or for the
//! execution target a run names.

use super::{Driver, DriverKind, lima, qemu, remote};
use crate::manifest::Target;
use crate::vm::paths::VmPaths;
use crate::vm::ssh::Endpoint;
use crate::vm::{Result, VmError};

/// The driver of a kind, over the state in `paths`.
pub fn for_kind(kind: DriverKind, paths: &VmPaths) -> Box<dyn Driver> {
    match kind {
        DriverKind::Qemu => Box::new(qemu::Qemu::new(paths)),
        DriverKind::Lima => Box::new(lima::Lima::new(paths)),
        DriverKind::Ssh => Box::new(remote::Remote::new(paths, None)),
    }
}

/// The driver behind an execution target (`host` has none).
pub fn for_target(target: &Target, paths: &VmPaths) -> Result<Box<dyn Driver>> {
    Ok(match target {
        Target::Host => {
            return Err(VmError::Invalid(
                "the host target has no SSH endpoint".into(),
            ));
        }
        Target::Qemu => Box::new(qemu::Qemu::new(paths)),
        Target::Lima => Box::new(lima::Lima::new(paths)),
        Target::Ssh { user, host, port } => Box::new(remote::Remote::new(
            paths,
            Some((user.clone(), host.clone(), *port)),
        )),
    })
}

/// The endpoint of a target, from the state `band setup` left.
pub fn endpoint_for(paths: &VmPaths, target: &Target) -> Result<Endpoint> {
    for_target(target, paths)?.endpoint()
}
