//! `lograil produce` and `lograil consume` (added with the console commands).
