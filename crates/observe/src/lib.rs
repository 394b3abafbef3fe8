//! `observe`: process and kernel statistics, loop lag, CSV, Prometheus, `top`, plots and the dashboard.
