//! JSON Schema contracts (PLACEHOLDER: to be implemented).
