//! Skill layout and discovery (in progress).
