//! Binder and planner tests: plans and errors for scripts over fixed input
//! columns, without running anything (the end-to-end tests against DuckDB
//! are in tests/sql.rs).
