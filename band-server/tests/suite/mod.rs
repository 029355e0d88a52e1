pub mod helpers;
mod privileged;
mod protocol;
