//! Unit tests of queue pairs, the doorbell and the engine, grouped by state.
