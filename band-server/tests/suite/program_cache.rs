//! Red-team round 3 (issue 36): one skill cannot fill the shared program cache.
