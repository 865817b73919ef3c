#![allow(clippy::unwrap_used)]
use super::*;

#[test]
fn the_append_clock_times_the_committed_offset_by_when_it_was_appended() {
    let mut clock = AppendClock::default();
    let t0 = Instant::now();
    let at = |ms| t0 + Duration::from_millis(ms);
    // Nothing unread: no age. Seen empty again at 100 ms; offsets 0..10 come after that.
    assert_eq!(clock.age_of(0, 0, 0, at(0)), None);
    assert_eq!(clock.age_of(0, 0, 0, at(100)), None);
    // At 1.7 s offsets 0..10 are unread: appended after the last sample of an empty log.
    let age = |ms| Some(Duration::from_millis(ms));
    assert_eq!(clock.age_of(0, 0, 10, at(1700)), age(1600));
    // More appends; the group commits 10: its record was appended after the 1.7 s sample.
    assert_eq!(clock.age_of(0, 5, 20, at(1800)), age(1700));
    assert_eq!(clock.age_of(0, 10, 20, at(2000)), age(300));
    // Caught up: no age.
    assert_eq!(clock.age_of(0, 20, 20, at(2100)), None);
    // A clock that starts with a backlog cannot tell: the caller reads the timestamp.
    assert_eq!(clock.age_of(1, 0, 10, at(0)), None);
    // The log shrank (records deleted, topic re-created): the clock starts again.
    assert_eq!(clock.age_of(0, 0, 5, at(2200)), None);
}

#[test]
fn the_rate_meter_measures_drain_and_appends_over_its_windows() {
    let mut meter = RateMeter::default();
    let t0 = Instant::now();
    let at = |ms: i64| t0 + Duration::from_millis(ms as u64);
    // A group committing every 100 ms, 50 records each (500/s), producers at 800/s.
    meter.note(at(0), 0, 0);
    assert_eq!(meter.drain_per_sec(), None, "one sample");
    for tick in 1..=5 {
        meter.note(at(tick * 100), tick * 50, tick * 80);
    }
    assert_eq!(meter.drain_per_sec(), None, "under a second of samples");
    assert_eq!(meter.appended_per_sec(), None);
    for tick in 6..=40 {
        meter.note(at(tick * 100), tick * 50, tick * 80);
    }
    let close = |a: f64, b: f64| (a - b).abs() < 1e-6;
    assert!(close(meter.drain_per_sec().unwrap(), 500.0));
    let (appended, span) = meter.appended_per_sec().unwrap();
    assert!(close(appended, 800.0));
    assert_eq!(span, APPEND_WINDOW);
    // The samples go back the drain window (one sample past it), not further.
    for tick in 41..=100 {
        meter.note(at(tick * 100), 2000, tick * 80);
    }
    assert_eq!(meter.samples.front().unwrap().0, at(5000));
    // The group stopped committing 5 s ago: no advance in the window, the pace is unknown;
    // appends are still measured.
    assert_eq!(meter.drain_per_sec(), None);
    assert!(close(meter.appended_per_sec().unwrap().0, 800.0));
    // It commits again, every second (robust to coarse commits): 600 records a second.
    for second in 1..=5 {
        meter.note(at(10_000 + second * 1000), 2000 + second * 600, 8000);
    }
    assert!(close(meter.drain_per_sec().unwrap(), 600.0));
    assert!(
        close(meter.appended_per_sec().unwrap().0, 0.0),
        "producers stopped"
    );
    // The group catches up and then drains only what arrives, 100 a second: that is not
    // its pace, the busy seconds before still are.
    meter.note(at(15_500), 8000, 8000);
    for tick in 1..=10 {
        meter.note(at(15_500 + tick * 100), 8000 + tick * 10, 8000 + tick * 10);
    }
    assert!(close(meter.drain_per_sec().unwrap(), 600.0));
    // Offsets reset (or records deleted): the samples start again.
    meter.note(at(16_600), 0, 8000);
    assert_eq!(meter.samples.len(), 1);
    assert_eq!(meter.drain_per_sec(), None);
}

#[test]
fn the_throttle_brings_the_accepted_rate_down_to_the_drain_rate() {
    let ms = Duration::from_millis;
    // Kafka's quota rule: twice the allowed rate over 2 s needs 2 s of quiet.
    assert_eq!(rate_throttle(2000.0, 1000.0, ms(2000)), ms(2000));
    assert_eq!(rate_throttle(1100.0, 1000.0, ms(2000)), ms(200));
    assert_eq!(rate_throttle(900.0, 1000.0, ms(2000)), Duration::ZERO);
    assert_eq!(rate_throttle(900.0, 0.0, ms(2000)), Duration::ZERO);
    // Over the bound, the backlog over it is caught up within CATCH_UP, at least half the
    // drain rate is allowed.
    assert_eq!(allowed_rate(1000.0, 0.0), 1000.0);
    assert_eq!(allowed_rate(1000.0, 400.0), 800.0);
    assert_eq!(allowed_rate(1000.0, 1e9), 500.0);

    let bound = Bound {
        group: "g".into(),
        max_records: Some(1000),
        max_age_ms: None,
        mode: Mode::Throttle,
    };
    let state = |records: i64, drain, appended| State {
        records,
        age_ms: None,
        over: (records - 1000) as f64 / 1000.0,
        over_records: (records - 1000) as f64 / 1000.0,
        excess_age_ms: 0,
        drain_per_sec: drain,
        appended,
        measured: Instant::now(),
    };
    let verdict = |s: &State| Backlogs::verdict("t", &bound, s, Duration::from_secs(30));
    // Drain known: 800 records over the bound, drained at 1,000/s: 600/s are allowed;
    // producers appending at 1,200/s over 2 s wait 2 s, but at most the 1.8 s the group
    // needs to drain its 1,800 records.
    let known = state(1800, Some(1000.0), Some((1200.0, ms(2000))));
    assert_eq!(verdict(&known), Verdict::Throttle(ms(1800)));
    let faster = state(1800, Some(1000.0), Some((1100.0, ms(2000))));
    let Verdict::Throttle(t) = verdict(&faster) else {
        panic!("not throttled")
    };
    assert!(t > ms(1600) && t < ms(1700), "2 s × 500 / 600: {t:?}");
    // Just over the bound, appending a little faster than the drain: a short throttle.
    let just = state(1010, Some(1000.0), Some((1100.0, ms(2000))));
    let Verdict::Throttle(t) = verdict(&just) else {
        panic!("not throttled")
    };
    assert!(t > ms(150) && t < ms(250), "{t:?}");
    // Slower than the drain already: the floor.
    let slower = state(1500, Some(1000.0), Some((300.0, ms(2000))));
    assert_eq!(verdict(&slower), Verdict::Throttle(MIN_THROTTLE));
    // Drain unknown: today's rule (half a bound over: 100 ms + 500 ms), capped.
    let unknown = state(1500, None, Some((300.0, ms(2000))));
    assert_eq!(verdict(&unknown), Verdict::Throttle(ms(600)));
    assert_eq!(
        Backlogs::verdict("t", &bound, &known, ms(1000)),
        Verdict::Throttle(ms(1000))
    );
    // Within the bound: no throttle whatever the rates.
    assert_eq!(
        verdict(&state(900, Some(1.0), Some((1e6, ms(2000))))),
        Verdict::Accept
    );
    // An age bound: 500 ms over at 1,000/s is 500 records over: 750/s allowed.
    let aged = State {
        age_ms: Some(1500),
        over: 0.5,
        over_records: f64::MIN,
        excess_age_ms: 500,
        ..state(3000, Some(1000.0), Some((1500.0, ms(2000))))
    };
    let by_age = Bound {
        max_records: None,
        max_age_ms: Some(1000),
        ..bound.clone()
    };
    assert_eq!(
        Backlogs::verdict("t", &by_age, &aged, Duration::from_secs(30)),
        Verdict::Throttle(ms(2000))
    );
}

#[test]
fn configs_are_checked_set_and_unset() {
    let mut config = TopicConfig::default();
    assert!(Bound::of(&config).is_none());
    set(&mut config, GROUP, "billing").unwrap();
    assert!(Bound::of(&config).is_none(), "no limit yet");
    set(&mut config, MAX_RECORDS, "1000").unwrap();
    let bound = Bound::of(&config).unwrap();
    assert_eq!(bound.max_records, Some(1000));
    assert_eq!(bound.mode, Mode::Throttle);
    set(&mut config, MODE, "reject").unwrap();
    assert_eq!(Bound::of(&config).unwrap().mode, Mode::Reject);
    assert!(set(&mut config, MODE, "drop").is_err());
    assert!(set(&mut config, MAX_AGE_MS, "0").is_err());
    assert!(set(&mut config, MAX_AGE_MS, "soon").is_err());
    assert!(set(&mut config, "lograil.backlog.nope", "1").is_err());
    set(&mut config, MAX_RECORDS, "-1").unwrap();
    assert!(Bound::of(&config).is_none());
    let back = TopicConfig::from_properties(&config.to_properties()).unwrap();
    assert_eq!(back, config, "kept with the topic");
}
