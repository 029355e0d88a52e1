mod bundled;
mod gate;
mod hardening;
pub(crate) mod helpers;
mod network;
mod observe;
mod plan;
mod privileged;
mod protocol;
