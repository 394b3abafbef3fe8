//! `store`: durable subscriptions behind one trait (SQLite embedded default, PostgreSQL, memory).
