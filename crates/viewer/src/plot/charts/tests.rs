use super::*;

#[test]
fn moving_average_is_trailing_and_skips_gaps() {
    let v = [1.0, 3.0, f64::NAN, 5.0];
    let m = moving_average(&v, 2);
    assert_eq!(m[0], 1.0);
    assert_eq!(m[1], 2.0);
    assert_eq!(m[2], 3.0);
    assert_eq!(m[3], 5.0);
}

#[test]
fn per_connection_figures_need_enough_connections() {
    let t = Table::parse(&b"time_s,connections,user_bytes_per_conn\n0,0,0\n1,3,400000\n2,99,5000\n3,100,300\n4,5000,180\n"[..]).unwrap();
    assert_eq!(
        per_connection(&t, "user_bytes_per_conn"),
        [0.0, 0.0, 0.0, 300.0, 180.0]
    );
}

#[test]
fn ladder_files_get_the_ladder_chart_only() {
    let text =
        "time_s,rate_msg_s,lat_p50_us,lat_p99_us,lat_max_us\n0,2,100,200,300\n12,5,150,400,900\n";
    let inp = Input {
        name: "ladder".into(),
        table: Table::parse(text.as_bytes()).unwrap(),
    };
    let charts = all(&[inp], 10);
    let files: Vec<&str> = charts.iter().map(|c| c.file).collect();
    assert_eq!(files, ["ladder.png"]);
    assert_eq!(charts[0].panels[0].x, [2.0, 5.0]);
    let limit = &charts[0].panels[0].lines[0];
    assert_eq!(
        (limit.label.as_str(), &limit.values[..]),
        ("1 s limit", &[1e6, 1e6][..])
    );
}

#[test]
fn a_ladder_with_its_own_limit_draws_that_line() {
    let text = "time_s,rate_msg_s,lat_p50_us,lat_p99_us,lat_max_us,limit_us\n\
                10,250,900,3000,4000,5000\n20,500,1200,9000,12000,5000\n";
    let inp = Input {
        name: "unicast-ladder".into(),
        table: Table::parse(text.as_bytes()).unwrap(),
    };
    let charts = all(&[inp], 10);
    let limit = &charts[0].panels[0].lines[0];
    assert_eq!(
        (limit.label.as_str(), &limit.values[..]),
        ("target", &[5000.0, 5000.0][..])
    );
}

#[test]
fn flood_files_get_no_lag_chart() {
    let text = format!(
        "{}\n0,1,0,0,5,300,100,900,1200,1000000,0.5,0.2\n",
        observe::csv::FLOOD_COLUMNS.join(",")
    );
    let inp = Input {
        name: "flood".into(),
        table: Table::parse(text.as_bytes()).unwrap(),
    };
    let files: Vec<&str> = all(&[inp], 10).iter().map(|c| c.file).collect();
    assert_eq!(
        files,
        [
            "memory.png",
            "cpu.png",
            "connections.png",
            "deliveries.png",
            "latency.png"
        ]
    );
}
