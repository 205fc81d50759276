//! The overview's charts, drawn with plotters into SVG text (the page inserts it):
//! inbox depth per status over time, the delivery latency distribution, and lease
//! expirations and stale-claim rejections per minute over time. All three read the
//! server's sample history (`GET /api/v1/ops/history`).
//!
//! Pure functions of the history and a palette, so they are unit-tested on the host;
//! the page picks the palette from the system's light/dark preference.

use plotters::prelude::*;
use switchboard_proto::{LatencyBucket, OpsHistory, OpsSample};

/// Chart size in CSS pixels (the SVG scales to its container).
pub(crate) const SIZE: (u32, u32) = (420, 240);

#[derive(Debug, Clone, Copy)]
pub(crate) struct Palette {
    pub(crate) fg: RGBColor,
    pub(crate) grid: RGBColor,
    pub(crate) pending: RGBColor,
    pub(crate) claimed: RGBColor,
    pub(crate) quarantined: RGBColor,
    pub(crate) bg: RGBColor,
}

pub(crate) const LIGHT: Palette = Palette {
    fg: RGBColor(0x33, 0x3a, 0x44),
    grid: RGBColor(0xdd, 0xe1, 0xe6),
    pending: RGBColor(0x1f, 0x6f, 0xd1),
    claimed: RGBColor(0xb5, 0x7a, 0x00),
    quarantined: RGBColor(0xc6, 0x28, 0x28),
    bg: RGBColor(0xf4, 0xf6, 0xf8),
};

pub(crate) const DARK: Palette = Palette {
    fg: RGBColor(0xd8, 0xdd, 0xe3),
    grid: RGBColor(0x3a, 0x40, 0x48),
    pending: RGBColor(0x6c, 0xa8, 0xff),
    claimed: RGBColor(0xf0, 0xb4, 0x3c),
    quarantined: RGBColor(0xff, 0x6b, 0x6b),
    bg: RGBColor(0x1e, 0x23, 0x28),
};

/// Why a chart is not drawn (shown instead of it).
pub(crate) const TOO_FEW: &str = "Collecting samples: the chart appears after the second one (the server samples every few seconds).";

type Drawn = Result<String, String>;

fn err(e: impl std::fmt::Display) -> String {
    format!("chart could not be drawn: {e}")
}

/// Minutes from the last sample (≤ 0) of each sample.
fn minutes(samples: &[OpsSample]) -> Vec<f64> {
    let Some(last) = samples.last() else {
        return Vec::new();
    };
    samples
        .iter()
        .map(|s| (s.at - last.at).as_seconds_f64() / 60.0)
        .collect()
}

/// A y-axis number that fits the label area: `950`, `12k`, `3.4M`.
fn compact(y: f64) -> String {
    match y.abs() {
        v if v >= 1e6 => format!("{:.1}M", y / 1e6),
        v if v >= 1e4 => format!("{:.0}k", y / 1e3),
        _ => format!("{y:.0}"),
    }
}

/// An x-axis label: `minutes` ago, in seconds while the window is short.
fn ago(minutes: f64, window_minutes: f64) -> String {
    if window_minutes < 2.0 {
        format!("{:.0}s", (minutes * 60.0).abs())
    } else {
        format!("{:.0}m", minutes.abs())
    }
}

fn font(p: &Palette) -> TextStyle<'static> {
    ("sans-serif", 14).into_font().color(&p.fg)
}

/// A line chart over the sample window: one line per `(label, colour, values)`.
fn lines(
    samples: &[OpsSample],
    series: &[(&str, RGBColor, Vec<f64>)],
    y_desc: &str,
    p: &Palette,
) -> Drawn {
    if samples.len() < 2 {
        return Err(TOO_FEW.to_owned());
    }
    let xs = minutes(samples);
    let x0 = xs.first().copied().unwrap_or(-1.0).min(-1.0 / 60.0);
    let top = series
        .iter()
        .flat_map(|(_, _, v)| v.iter().copied())
        .fold(0.0f64, f64::max);
    let y_max = if top < 1.0 { 1.0 } else { top * 1.1 };
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(44)
            .build_cartesian_2d(x0..0.0, 0.0..y_max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .light_line_style(p.grid.mix(0.5))
            .bold_line_style(p.grid)
            .axis_style(p.fg)
            .label_style(font(p))
            .axis_desc_style(font(p))
            .x_desc("ago")
            .y_desc(y_desc)
            .x_label_formatter(&|x| ago(-x, -x0))
            .y_label_formatter(&|y| compact(*y))
            .x_labels(6)
            .y_labels(5)
            .draw()
            .map_err(err)?;
        for (label, colour, values) in series {
            let colour = *colour;
            chart
                .draw_series(LineSeries::new(
                    xs.iter().copied().zip(values.iter().copied()),
                    colour.stroke_width(2),
                ))
                .map_err(err)?
                .label(*label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 14, y)], colour.stroke_width(2))
                });
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(p.bg.mix(0.85))
            .border_style(p.grid)
            .label_font(font(p))
            .draw()
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

/// Inbox depth per status (pending, claimed, quarantined) over the window.
pub(crate) fn depth(h: &OpsHistory, p: &Palette) -> Drawn {
    let s = &h.samples;
    let col = |f: fn(&OpsSample) -> u64| s.iter().map(|x| f(x) as f64).collect::<Vec<_>>();
    lines(
        s,
        &[
            ("pending", p.pending, col(|x| x.pending)),
            ("claimed", p.claimed, col(|x| x.claimed)),
            ("quarantined", p.quarantined, col(|x| x.quarantined)),
        ],
        "events",
        p,
    )
}

/// Per-minute rate of a counter between consecutive samples (the first sample has
/// no predecessor: it repeats the second's rate, so the line spans the window).
pub(crate) fn per_minute(samples: &[OpsSample], f: fn(&OpsSample) -> u64) -> Vec<f64> {
    let mut out: Vec<f64> = samples
        .windows(2)
        .map(|w| {
            let secs = (w[1].at - w[0].at).as_seconds_f64();
            let delta = f(&w[1]).saturating_sub(f(&w[0])) as f64;
            if secs > 0.0 { delta * 60.0 / secs } else { 0.0 }
        })
        .collect();
    if let Some(&first) = out.first() {
        out.insert(0, first);
    }
    out
}

/// Lease expirations, stale-claim and fencing rejections per minute over the window.
pub(crate) fn expirations(h: &OpsHistory, p: &Palette) -> Drawn {
    let s = &h.samples;
    lines(
        s,
        &[
            (
                "lease expirations",
                p.claimed,
                per_minute(s, |x| x.lease_expirations_total),
            ),
            (
                "stale-claim rejections",
                p.quarantined,
                per_minute(s, |x| x.stale_claim_rejections_total),
            ),
            (
                "fencing rejections",
                p.pending,
                per_minute(s, |x| x.fencing_rejections_total),
            ),
        ],
        "per minute",
        p,
    )
}

/// `≤ 25ms`, `≤ 2.5s`, `> 300s`: a latency bucket's label.
pub(crate) fn bucket_label(buckets: &[LatencyBucket], i: usize) -> String {
    let secs = |s: f64| {
        if s < 1.0 {
            format!("{}ms", (s * 1000.0).round())
        } else {
            format!("{s}s")
        }
    };
    match buckets.get(i).and_then(|b| b.le_seconds) {
        Some(le) => format!("≤{}", secs(le)),
        None => match i.checked_sub(1).and_then(|j| buckets.get(j)?.le_seconds) {
            Some(prev) => format!(">{}", secs(prev)),
            None => "all".to_owned(),
        },
    }
}

/// The delivery latency distribution of the acks in the window.
pub(crate) fn latency(h: &OpsHistory, p: &Palette) -> Drawn {
    let b = &h.latency;
    let total: u64 = b.iter().map(|x| x.count).sum();
    if total == 0 {
        return Err(
            "No acks in the window yet: the distribution appears with the first ack.".to_owned(),
        );
    }
    // From one bucket below the first ack to one above the last: readable labels.
    let first = b.iter().position(|x| x.count > 0).unwrap_or(0);
    let last = b.iter().rposition(|x| x.count > 0).unwrap_or(0);
    let lo = first.saturating_sub(1);
    let hi = (last + 1).min(b.len() - 1);
    let shown = &b[lo..=hi];
    let top = shown.iter().map(|x| x.count).max().unwrap_or(1);
    let n = shown.len();
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, SIZE).into_drawing_area();
        let mut chart = ChartBuilder::on(&root)
            .margin(8)
            .x_label_area_size(30)
            .y_label_area_size(44)
            .build_cartesian_2d((0..n).into_segmented(), 0u64..top + top / 10 + 1)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(p.grid.mix(0.5))
            .bold_line_style(p.grid)
            .axis_style(p.fg)
            .label_style(font(p))
            .axis_desc_style(font(p))
            .y_desc("acks")
            .x_labels(n)
            .x_label_formatter(&|v| match v {
                SegmentValue::CenterOf(i) | SegmentValue::Exact(i) if *i < n => {
                    bucket_label(b, lo + *i)
                }
                _ => String::new(),
            })
            .draw()
            .map_err(err)?;
        chart
            .draw_series(
                Histogram::vertical(&chart)
                    .style(p.pending.filled())
                    .margin(3)
                    .data(shown.iter().enumerate().map(|(i, x)| (i, x.count))),
            )
            .map_err(err)?;
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use time::OffsetDateTime;

    fn sample(secs: i64, pending: u64, expirations: u64) -> OpsSample {
        OpsSample {
            at: OffsetDateTime::from_unix_timestamp(1_800_000_000 + secs).unwrap(),
            pending,
            claimed: 1,
            quarantined: 0,
            lease_expirations_total: expirations,
            stale_claim_rejections_total: 0,
            fencing_rejections_total: 0,
            delivered_total: 0,
        }
    }

    fn history(samples: Vec<OpsSample>, latency: Vec<(Option<f64>, u64)>) -> OpsHistory {
        OpsHistory {
            interval_seconds: 5.0,
            samples,
            latency: latency
                .into_iter()
                .map(|(le_seconds, count)| LatencyBucket { le_seconds, count })
                .collect(),
        }
    }

    #[test]
    fn depth_draws_one_line_per_status_with_a_legend() {
        let h = history(
            vec![sample(0, 3, 0), sample(5, 10, 0), sample(10, 4, 0)],
            vec![],
        );
        let svg = depth(&h, &LIGHT).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..40]);
        // One data line per status, each through the three samples (axes and legend
        // marks are polylines too, with two points).
        let data_lines = svg
            .lines()
            .filter(|l| l.starts_with("<polyline") && l.contains("stroke-width=\"2\""))
            .filter(|l| {
                l.split("points=\"")
                    .nth(1)
                    .is_some_and(|p| p.split(' ').filter(|x| x.contains(',')).count() == 3)
            })
            .count();
        assert_eq!(data_lines, 3, "{svg}");
        // Ten seconds of samples: the axis counts seconds back to 0s.
        for label in ["pending", "claimed", "quarantined", "\n9s\n", "\n0s\n"] {
            assert!(svg.contains(label), "{label:?} missing: {svg}");
        }
        // The pending colour is used for its line.
        assert!(svg.contains("#1F6FD1"), "pending line colour");
    }

    #[test]
    fn axis_numbers_stay_short() {
        assert_eq!(compact(950.0), "950");
        assert_eq!(compact(80_000.0), "80k");
        assert_eq!(compact(3_400_000.0), "3.4M");
        assert_eq!(ago(0.5, 1.0), "30s");
        assert_eq!(ago(12.0, 60.0), "12m");
    }

    #[test]
    fn one_sample_is_too_few_and_says_so() {
        let h = history(vec![sample(0, 3, 0)], vec![]);
        assert_eq!(depth(&h, &DARK).unwrap_err(), TOO_FEW);
        assert_eq!(expirations(&h, &DARK).unwrap_err(), TOO_FEW);
    }

    #[test]
    fn rates_per_minute_come_from_consecutive_samples() {
        let s = vec![sample(0, 0, 0), sample(30, 0, 5), sample(60, 0, 5)];
        assert_eq!(
            per_minute(&s, |x| x.lease_expirations_total),
            [10.0, 10.0, 0.0]
        );
        assert!(per_minute(&s[..1], |x| x.lease_expirations_total).is_empty());
        let h = history(s, vec![]);
        let svg = expirations(&h, &LIGHT).unwrap();
        assert!(svg.contains("lease expirations") && svg.contains("per minute"));
    }

    #[test]
    fn latency_bars_span_the_acks_and_label_their_bounds() {
        let b = vec![(Some(0.005), 2), (Some(0.5), 0), (Some(2.5), 7), (None, 1)];
        let h = history(vec![], b);
        let labels: Vec<String> = (0..4).map(|i| bucket_label(&h.latency, i)).collect();
        assert_eq!(labels, ["≤5ms", "≤500ms", "≤2.5s", ">2.5s"]);
        let svg = latency(&h, &LIGHT).unwrap();
        // One bar per bucket, of height 0 for the empty one.
        let heights: Vec<&str> = svg
            .lines()
            .filter(|l| l.starts_with("<rect") && l.contains("fill=\"#1F6FD1\""))
            .filter_map(|l| l.split("height=\"").nth(1)?.split('"').next())
            .collect();
        assert_eq!(heights.len(), 4, "{svg}");
        assert_eq!(
            heights.iter().filter(|h| **h != "0").count(),
            3,
            "{heights:?}"
        );
        assert!(svg.contains("≤2.5s"));
        // Empty buckets far from the acks are left out; one on each side stays.
        let wide = history(
            vec![],
            vec![
                (Some(0.01), 0),
                (Some(0.1), 0),
                (Some(1.0), 4),
                (Some(10.0), 0),
                (Some(60.0), 0),
                (None, 0),
            ],
        );
        let svg = latency(&wide, &LIGHT).unwrap();
        for shown in ["≤100ms", "≤1s", "≤10s"] {
            assert!(svg.contains(shown), "{shown} shown");
        }
        for hidden in ["≤10ms", "≤60s"] {
            assert!(!svg.contains(hidden), "{hidden} left out");
        }
        let empty = history(vec![], vec![(Some(0.1), 0), (None, 0)]);
        assert!(latency(&empty, &LIGHT).unwrap_err().contains("No acks"));
    }
}
