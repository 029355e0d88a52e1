//! Red-team round 3 (issue 36): the run's /proc shows no host kernel facts.
