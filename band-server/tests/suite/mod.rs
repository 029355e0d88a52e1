pub mod helpers;
mod network;
mod privileged;
mod protocol;
