//! `--plot FILE.png`: throughput per second over each benchmark, one line per engine, one
//! panel per benchmark, so that write stalls show as dips.
//!
//! Drawn with plotters' bitmap backend. Text is rendered from the 8x8 bitmap font of the
//! `font8x8` crate, pixel by pixel, so the picture needs no system fonts (plotters' own text
//! needs fontconfig or a font file).

use super::record::Record;
use super::summary::SummaryRow;
use super::timeline::Timeline;
use crate::text::si;
use anyhow::{anyhow, Result};
use font8x8::{UnicodeFonts, BASIC_FONTS};
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// One benchmark's panel: a throughput line per engine.
pub struct Panel {
    pub title: String,
    pub series: Vec<(String, Timeline)>,
}

const WIDTH: u32 = 1200;
const PANEL_HEIGHT: u32 = 300;
const LEGEND_HEIGHT: u32 = 40;
const LEFT: u32 = 90;
const RIGHT: u32 = 20;
const TOP: u32 = 30;
const BOTTOM: u32 = 40;

const PALETTE: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// The color of the `i`-th engine of the run.
pub fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// For each threaded benchmark, each engine's throughput in its median round.
pub fn panels(records: &[Record], summary: &[SummaryRow]) -> Vec<Panel> {
    let mut panels: Vec<Panel> = Vec::new();
    for row in summary {
        let Some(r) = records.iter().find(|r| {
            r.benchmark == row.benchmark && r.engine == row.engine && r.round == row.median_round
        }) else {
            continue;
        };
        if r.timeline.ops_per_sec.is_empty() {
            continue;
        }
        let series = (r.engine.clone(), r.timeline.clone());
        match panels.iter_mut().find(|p| p.title == row.benchmark) {
            Some(p) => p.series.push(series),
            None => panels.push(Panel {
                title: row.benchmark.clone(),
                series: vec![series],
            }),
        }
    }
    panels
}

/// Draws `panels` into a PNG at `path`; `engines` fixes the colors and the legend.
pub fn draw(path: &Path, engines: &[&str], panels: &[Panel]) -> Result<()> {
    let fail = |e: &dyn std::fmt::Display| anyhow!("cannot draw {}: {e}", path.display());
    let height = LEGEND_HEIGHT + PANEL_HEIGHT * panels.len().max(1) as u32;
    let root = BitMapBackend::new(path, (WIDTH, height)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;

    // Legend.
    let mut x = 20;
    text(&root, (x, 8), "ops/s over time:", 2, &BLACK);
    x += 17 * 16 + 10;
    for (i, e) in engines.iter().enumerate() {
        root.draw(&Rectangle::new([(x, 10), (x + 24, 22)], color(i).filled()))
            .map_err(|e| fail(&e))?;
        text(&root, (x + 30, 8), e, 2, &BLACK);
        x += 30 + 16 * e.len() as i32 + 30;
    }

    let (_, body) = root.split_vertically(LEGEND_HEIGHT);
    let areas = body.split_evenly((panels.len().max(1), 1));
    for (area, panel) in areas.iter().zip(panels) {
        draw_panel(&root, area, engines, panel).map_err(|e| fail(&e))?;
    }
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}

pub(super) type Area<'a> = DrawingArea<BitMapBackend<'a>, Shift>;

fn draw_panel(
    root: &Area<'_>,
    area: &Area<'_>,
    engines: &[&str],
    panel: &Panel,
) -> std::result::Result<
    (),
    DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>,
> {
    let points: Vec<(usize, Vec<(f64, f64)>)> = panel
        .series
        .iter()
        .map(|(engine, t)| {
            let i = engines.iter().position(|e| e == engine).unwrap_or(0);
            let pts = t
                .ops_per_sec
                .iter()
                .enumerate()
                .map(|(j, &r)| ((j as f64 + 0.5) * t.interval_s, r))
                .collect();
            (i, pts)
        })
        .collect();
    let xmax = points
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .fold(0.0f64, f64::max)
        .max(0.1)
        * 1.02;
    let ymax = points
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.0f64, f64::max)
        .max(1.0);
    let ystep = nice_step(ymax / 5.0);
    let ymax = (ymax / ystep).ceil() * ystep;
    let xstep = nice_step(xmax / 10.0);

    let mut chart = ChartBuilder::on(area)
        .margin_left(LEFT)
        .margin_right(RIGHT)
        .margin_top(TOP)
        .margin_bottom(BOTTOM)
        .build_cartesian_2d(0f64..xmax, 0f64..ymax)?;

    let grid = RGBColor(225, 225, 225);
    let mut y = 0.0;
    while y <= ymax + ystep / 2.0 {
        chart.draw_series(LineSeries::new([(0.0, y), (xmax, y)], grid))?;
        let (px, py) = chart.backend_coord(&(0.0, y));
        let label = si(y);
        text(
            root,
            (px - 8 - 8 * label.len() as i32, py - 4),
            &label,
            1,
            &BLACK,
        );
        y += ystep;
    }
    let mut x = 0.0;
    while x <= xmax {
        chart.draw_series(LineSeries::new([(x, 0.0), (x, ymax)], grid))?;
        let (px, py) = chart.backend_coord(&(x, 0.0));
        let label = secs(x, xstep);
        text(
            root,
            (px - 4 * label.len() as i32, py + 8),
            &label,
            1,
            &BLACK,
        );
        x += xstep;
    }
    chart.draw_series(std::iter::once(Rectangle::new(
        [(0.0, 0.0), (xmax, ymax)],
        BLACK.stroke_width(1),
    )))?;
    for (i, pts) in &points {
        let pts = if pts.len() == 1 {
            // One bucket: a flat segment across it so that it is visible.
            vec![(0.0, pts[0].1), (pts[0].0 * 2.0, pts[0].1)]
        } else {
            pts.clone()
        };
        chart.draw_series(LineSeries::new(pts, color(*i).stroke_width(2)))?;
    }
    let (px, py) = chart.backend_coord(&(0.0, ymax));
    text(root, (px, py - 22), &panel.title, 2, &BLACK);
    let (ex, ey) = chart.backend_coord(&(xmax, 0.0));
    text(root, (ex - 8 * 7, ey + 22), "seconds", 1, &BLACK);
    Ok(())
}

/// Draws `s` with its top-left corner at `pos`, each font pixel `scale` pixels wide.
pub(super) fn text(root: &Area<'_>, pos: (i32, i32), s: &str, scale: i32, color: &RGBColor) {
    let mut x = pos.0;
    for c in s.chars() {
        let glyph = BASIC_FONTS.get(c).or_else(|| BASIC_FONTS.get('?'));
        if let Some(rows) = glyph {
            for (dy, row) in rows.iter().enumerate() {
                for dx in 0..8 {
                    if row & (1 << dx) != 0 {
                        for sy in 0..scale {
                            for sx in 0..scale {
                                // Pixels outside the picture are dropped by the backend.
                                let _ = root.draw_pixel(
                                    (x + dx * scale + sx, pos.1 + dy as i32 * scale + sy),
                                    color,
                                );
                            }
                        }
                    }
                }
            }
        }
        x += 8 * scale;
    }
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
pub fn nice_step(raw: f64) -> f64 {
    if raw <= 0.0 || !raw.is_finite() {
        return 1.0;
    }
    let p = 10f64.powf(raw.log10().floor());
    for m in [1.0, 2.0, 5.0, 10.0] {
        if m * p >= raw {
            return m * p;
        }
    }
    10.0 * p
}

/// An axis label with as many decimals as the step needs (step 0.05 -> "0.15").
fn secs(x: f64, step: f64) -> String {
    let decimals = if step >= 1.0 {
        0
    } else {
        (-step.log10()).ceil() as usize
    };
    format!("{x:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nice_steps() {
        assert_eq!(nice_step(0.7), 1.0);
        assert_eq!(nice_step(1.3), 2.0);
        assert_eq!(nice_step(3.0), 5.0);
        assert_eq!(nice_step(7.0), 10.0);
        assert_eq!(nice_step(4200.0), 5000.0);
        assert_eq!(nice_step(0.0), 1.0);
    }

    #[test]
    fn axis_labels_have_the_decimals_of_the_step() {
        assert_eq!(secs(3.0, 1.0), "3");
        assert_eq!(secs(0.2, 0.1), "0.2");
        assert_eq!(secs(0.15, 0.05), "0.15");
        assert_eq!(secs(40.0, 20.0), "40");
    }

    #[test]
    fn draws_a_png() {
        let t = tempfile::tempdir().unwrap();
        let path = t.path().join("p.png");
        let tl = |v: &[f64]| Timeline {
            interval_s: 1.0,
            ops_per_sec: v.to_vec(),
        };
        let panels = vec![
            Panel {
                title: "fillrandom".into(),
                series: vec![
                    ("strata".into(), tl(&[1000.0, 1200.0, 300.0, 1100.0])),
                    ("fjall".into(), tl(&[800.0, 900.0])),
                ],
            },
            Panel {
                title: "readrandom".into(),
                series: vec![("strata".into(), tl(&[5000.0]))],
            },
        ];
        draw(&path, &["strata", "fjall"], &panels).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n");
        assert!(bytes.len() > 1000);
    }
}
