//! LATENCY GRAPH and LATENCY DOCTOR's texts (Redis 7.0's latency.c and sparkline.c), as
//! pure functions of the latency monitor's samples (`latency.rs`) and the time now.
//!
//! Layer: services (pure functions over the latency monitor's samples).

use crate::latency::Series;
use std::fmt::Write;

/// Columns of a graph (Redis's `LATENCY_GRAPH_COLS`) and its rows of bars.
const COLS: usize = 80;
const ROWS: usize = 4;
/// Bar characters from low to high; a bar above a row fills it with `|`.
const FILL: [u8; 3] = [b'_', b'o', b'#'];

/// How long ago `t` was, as a graph label: seconds, minutes, hours or days.
fn ago(now_s: u64, t: u64) -> String {
    let e = now_s.saturating_sub(t);
    match e {
        0..=59 => format!("{e}s"),
        60..=3599 => format!("{}m", e / 60),
        3600..=86399 => format!("{}h", e / 3600),
        _ => format!("{}d", e / 86400),
    }
}

/// LATENCY GRAPH's text for `event`: a header, a rule, then the samples as a four-row bar
/// chart (80 samples per block) with each sample's age written downwards under it.
pub fn graph(event: &str, s: &Series, now_s: u64) -> String {
    let values: Vec<u64> = s.samples.iter().map(|&(_, ms)| ms).collect();
    let labels: Vec<String> = s.samples.iter().map(|&(t, _)| ago(now_s, t)).collect();
    let min = values.iter().copied().min().unwrap_or(0);
    let max = values.iter().copied().max().unwrap_or(0);
    let mut out = format!(
        "{event} - high {max} ms, low {min} ms (all time high {} ms)\n",
        s.max
    );
    out.push_str(&"-".repeat(COLS));
    out.push('\n');
    let span = if max == min { 1.0 } else { (max - min) as f64 };
    let steps = FILL.len() * ROWS;
    let step_of = |v: u64| -> usize {
        let rel = (v - min) as f64;
        let step = ((rel * steps as f64) as i64 as f64 / span) as i64;
        step.clamp(0, steps as i64 - 1) as usize
    };
    for (block, start) in (0..values.len()).step_by(COLS).enumerate() {
        if block > 0 {
            out.push('\n');
        }
        let end = (start + COLS).min(values.len());
        for row in 0..ROWS {
            let line: String = (start..end)
                .map(|j| {
                    let below = (ROWS - row - 1) * FILL.len();
                    let step = step_of(values[j]);
                    if step < below {
                        ' '
                    } else if step - below < FILL.len() {
                        FILL[step - below] as char
                    } else {
                        '|'
                    }
                })
                .collect();
            out.push_str(&line);
            out.push('\n');
        }
        // A blank row, then the labels, one character per row.
        out.push_str(&" ".repeat(end - start));
        out.push('\n');
        let tallest = labels[start..end]
            .iter()
            .map(String::len)
            .max()
            .unwrap_or(0);
        for i in 0..tallest {
            let line: String = labels[start..end]
                .iter()
                .map(|l| l.as_bytes().get(i).map_or(' ', |&c| c as char))
                .collect();
            out.push_str(&line);
            out.push('\n');
        }
    }
    out
}

/// What DOCTOR's advice depends on beyond the samples.
pub struct DoctorInput {
    pub threshold_ms: u64,
    pub slowlog_log_slower_than: i64,
    /// The process uses transparent huge pages (AnonHugePages in /proc/self/smaps_rollup).
    pub huge_pages: bool,
}

/// LATENCY DOCTOR's report (Redis's `createLatencyReport`) over `events` (name order)
/// for the events Strata records ("command" and "fast-command").
pub fn doctor(events: &[(String, Series)], now_s: u64, input: &DoctorInput) -> String {
    let mut r = String::new();
    if events.is_empty() && input.threshold_ms == 0 {
        r.push_str(
            "I'm sorry, Dave, I can't do that. Latency monitoring is disabled in this Redis \
             instance. You may use \"CONFIG SET latency-monitor-threshold <milliseconds>.\" in \
             order to enable it. If we weren't in a deep space mission I'd suggest to take a \
             look at https://redis.io/topics/latency-monitor.\n",
        );
        return r;
    }
    let (mut slowlog_enable, mut slowlog_tune, mut slowlog_inspect) = (false, false, false);
    let (mut scheduler, mut large_objects) = (false, false);
    let mut advices = 0;
    for (n, (name, s)) in events.iter().enumerate() {
        if n == 0 {
            r.push_str(
                "Dave, I have observed latency spikes in this Redis instance. You don't mind \
                 talking about it, do you Dave?\n\n",
            );
        }
        let count = s.samples.len() as u64;
        let sum = s.samples.iter().map(|&(_, ms)| ms).sum::<u64>();
        let avg = sum.checked_div(count).unwrap_or(0);
        let deviation = s
            .samples
            .iter()
            .map(|&(_, ms)| (avg as i64 - ms as i64).unsigned_abs())
            .sum::<u64>();
        let mad = deviation.checked_div(count).unwrap_or(0);
        let oldest = s.samples.iter().map(|&(t, _)| t).min();
        let period = oldest.map_or(0, |t| now_s.saturating_sub(t).max(1));
        let _ = write!(
            r,
            "{}. {name}: {count} latency spikes (average {avg}ms, mean deviation {mad}ms, \
             period {:.2} sec). Worst all time event {}ms.",
            n + 1,
            period as f64 / count.max(1) as f64,
            s.max
        );
        if name == "command" {
            if input.slowlog_log_slower_than < 0 {
                slowlog_enable = true;
                advices += 1;
            } else if (input.slowlog_log_slower_than / 1000) as u64 > input.threshold_ms {
                slowlog_tune = true;
                advices += 1;
            }
            slowlog_inspect = true;
            large_objects = true;
            advices += 2;
        }
        if name == "fast-command" {
            scheduler = true;
            advices += 1;
        }
        r.push('\n');
    }
    if input.huge_pages {
        advices += 1;
    }
    if events.is_empty() && advices == 0 {
        r.push_str(
            "Dave, no latency spike was observed during the lifetime of this Redis instance, \
             not in the slightest bit. I honestly think you ought to sit down calmly, take a \
             stress pill, and think things over.\n",
        );
        return r;
    }
    if advices == 0 {
        r.push_str(
            "\nWhile there are latency events logged, I'm not able to suggest any easy fix. \
             Please use the Redis community to get some help, providing this report in your \
             help request.\n",
        );
        return r;
    }
    r.push_str("\nI have a few advices for you:\n\n");
    let micros = input.threshold_ms * 1000;
    if slowlog_enable {
        let _ = writeln!(
            r,
            "- There are latency issues with potentially slow commands you are using. Try to \
             enable the Slow Log Redis feature using the command 'CONFIG SET \
             slowlog-log-slower-than {micros}'. If the Slow log is disabled Redis is not able \
             to log slow commands execution for you."
        );
    }
    if slowlog_tune {
        let _ = writeln!(
            r,
            "- Your current Slow Log configuration only logs events that are slower than your \
             configured latency monitor threshold. Please use 'CONFIG SET \
             slowlog-log-slower-than {micros}'."
        );
    }
    if slowlog_inspect {
        r.push_str(
            "- Check your Slow Log to understand what are the commands you are running which \
             are too slow to execute. Please check https://redis.io/commands/slowlog for more \
             information.\n",
        );
    }
    if scheduler {
        r.push_str(
            "- The system is slow to execute Redis code paths not containing system calls. \
             This usually means the system does not provide Redis CPU time to run for long \
             periods. You should try to:\n  1) Lower the system load.\n  2) Use a computer / \
             VM just for Redis if you are running other software in the same system.\n  3) \
             Check if you have a \"noisy neighbour\" problem.\n  4) Check with 'redis-cli \
             --intrinsic-latency 100' what is the intrinsic latency in your system.\n  5) \
             Check if the problem is allocator-related by recompiling Redis with MALLOC=libc, \
             if you are using Jemalloc. However this may create fragmentation problems.\n",
        );
    }
    if large_objects {
        r.push_str(
            "- Deleting, expiring or evicting (because of maxmemory policy) large objects is a \
             blocking operation. If you have very large objects that are often deleted, \
             expired, or evicted, try to fragment those objects into multiple smaller \
             objects.\n",
        );
    }
    if input.huge_pages {
        r.push_str(
            "- I detected a non zero amount of anonymous huge pages used by your process. This \
             creates very serious latency events in different conditions, especially when \
             Redis is persisting on disk. To disable THP support use the command 'echo never > \
             /sys/kernel/mm/transparent_hugepage/enabled', make sure to also add it into \
             /etc/rc.local so that the command will be executed again after a reboot. Note \
             that even if you have already disabled THP, you still need to restart the Redis \
             process to get rid of the huge pages already created.\n",
        );
    }
    r
}

/// Whether this process has anonymous huge pages (Redis's `THPGetAnonHugePagesSize`).
pub fn huge_pages_in_use() -> bool {
    let Ok(text) = std::fs::read_to_string("/proc/self/smaps_rollup") else {
        return false;
    };
    text.lines()
        .filter_map(|l| l.strip_prefix("AnonHugePages:"))
        .any(|v| {
            v.trim()
                .trim_end_matches("kB")
                .trim()
                .parse::<u64>()
                .unwrap_or(0)
                > 0
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(samples: &[(u64, u64)], max: u64) -> Series {
        Series {
            samples: samples.iter().copied().collect(),
            max,
        }
    }

    #[test]
    fn graph_draws_bars_and_ages() {
        let s = series(&[(100, 10), (130, 20), (165, 40)], 50);
        let g = graph("command", &s, 170);
        let want = "command - high 40 ms, low 10 ms (all time high 50 ms)\n".to_string()
            + &"-".repeat(80)
            + "\n  #\n  |\n o|\n_||\n   \n145\nm0s\n s \n";
        assert_eq!(g, want);
    }

    #[test]
    fn doctor_reports_and_advises() {
        let input = DoctorInput {
            threshold_ms: 0,
            slowlog_log_slower_than: 10000,
            huge_pages: false,
        };
        assert!(doctor(&[], 0, &input).starts_with("I'm sorry, Dave"));
        let input = DoctorInput {
            threshold_ms: 5,
            ..input
        };
        assert!(doctor(&[], 0, &input).starts_with("Dave, no latency spike"));
        let events = vec![("command".to_string(), series(&[(90, 10), (100, 20)], 20))];
        let r = doctor(&events, 100, &input);
        assert!(
            r.starts_with(
                "Dave, I have observed latency spikes in this Redis instance. You don't mind \
             talking about it, do you Dave?\n\n1. command: 2 latency spikes (average 15ms, \
             mean deviation 5ms, period 5.00 sec). Worst all time event 20ms.\n\nI have a \
             few advices for you:\n\n- Your current Slow Log configuration only logs events \
             that are slower than your configured latency monitor threshold. Please use \
             'CONFIG SET slowlog-log-slower-than 5000'.\n- Check your Slow Log"
            ),
            "{r}"
        );
        assert!(r.contains("- Deleting, expiring or evicting"));
    }
}
