//! .k2 files (placeholder)
