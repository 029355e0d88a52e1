//! `band lint` (in progress).
