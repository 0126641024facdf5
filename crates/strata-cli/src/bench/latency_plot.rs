//! `--latency-plot FILE.png` with a `--rate` list: p50 and p99 latency against offered load,
//! a line per engine (p2KVS Fig. 13). Log-scaled latency axis, offered load in ops/s.

use super::args::BenchArgs;
use super::plot::{color, nice_step, text, Area};
use super::summary::SummaryRow;
use crate::text::si;
use anyhow::{anyhow, Result};
use plotters::prelude::*;
use std::path::Path;

/// One engine's curve: (offered ops/s, p50 µs, p99 µs) per rate.
pub struct Curve {
    pub engine: String,
    pub points: Vec<(f64, f64, f64)>,
}

const WIDTH: u32 = 1200;
const PANEL_HEIGHT: u32 = 360;
const LEGEND_HEIGHT: u32 = 40;

/// For the first rated benchmark, each engine's median p50 and p99 at each offered rate.
pub fn curves(args: &BenchArgs, labels: &[String], summary: &[SummaryRow]) -> Vec<Curve> {
    let Some(first) = labels
        .iter()
        .zip(&args.benchmarks)
        .find(|(_, b)| !b.one_shot())
        .map(|(l, _)| l)
    else {
        return Vec::new();
    };
    args.engines
        .iter()
        .map(|e| {
            let points = args
                .rate
                .iter()
                .filter_map(|&rate| {
                    let label = if args.rate.len() > 1 {
                        format!("{first}@{rate}")
                    } else {
                        first.clone()
                    };
                    let row = summary
                        .iter()
                        .find(|r| r.benchmark == label && r.engine == e.name())?;
                    let x = if rate > 0 {
                        rate as f64
                    } else {
                        row.ops_per_sec
                    };
                    Some((x, row.p50_us?, row.p99_us?))
                })
                .collect();
            Curve {
                engine: e.name().to_string(),
                points,
            }
        })
        .collect()
}

/// Draws one panel for p50 and one for p99.
pub fn draw(path: &Path, title: &str, curves: &[Curve]) -> Result<()> {
    let fail = |e: &dyn std::fmt::Display| anyhow!("cannot draw {}: {e}", path.display());
    let root =
        BitMapBackend::new(path, (WIDTH, LEGEND_HEIGHT + 2 * PANEL_HEIGHT)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| fail(&e))?;
    let mut x = 20;
    text(&root, (x, 8), title, 2, &BLACK);
    x += 16 * title.len() as i32 + 20;
    for (i, c) in curves.iter().enumerate() {
        root.draw(&Rectangle::new([(x, 10), (x + 24, 22)], color(i).filled()))
            .map_err(|e| fail(&e))?;
        text(&root, (x + 30, 8), &c.engine, 2, &BLACK);
        x += 30 + 16 * c.engine.len() as i32 + 24;
    }
    let (_, body) = root.split_vertically(LEGEND_HEIGHT);
    let areas = body.split_evenly((2, 1));
    for (k, area) in areas.iter().enumerate() {
        panel(&root, area, curves, k == 1).map_err(|e| fail(&e))?;
    }
    root.present().map_err(|e| fail(&e))?;
    Ok(())
}

fn panel(
    root: &Area<'_>,
    area: &Area<'_>,
    curves: &[Curve],
    p99: bool,
) -> std::result::Result<
    (),
    DrawingAreaErrorKind<<BitMapBackend<'static> as DrawingBackend>::ErrorType>,
> {
    let pick = |p: &(f64, f64, f64)| (p.0, if p99 { p.2 } else { p.1 }.max(0.1));
    let xmax = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| p.0))
        .fold(0.0f64, f64::max)
        .max(1.0)
        * 1.05;
    let ys: Vec<f64> = curves
        .iter()
        .flat_map(|c| c.points.iter().map(|p| pick(p).1))
        .collect();
    let ymin = 10f64.powf(ys.iter().cloned().fold(f64::MAX, f64::min).log10().floor());
    let ymax = 10f64.powf(ys.iter().cloned().fold(1.0, f64::max).log10().ceil());
    let ymin = if ymin.is_finite() { ymin } else { 1.0 };
    let mut chart = ChartBuilder::on(area)
        .margin_left(90)
        .margin_right(20)
        .margin_top(30)
        .margin_bottom(40)
        .build_cartesian_2d(0f64..xmax, (ymin..ymax).log_scale())?;
    let grid = RGBColor(225, 225, 225);
    let mut y = ymin;
    while y <= ymax * 1.001 {
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
        y *= 10.0;
    }
    let xstep = nice_step(xmax / 10.0);
    let mut x = 0.0;
    while x <= xmax {
        chart.draw_series(LineSeries::new([(x, ymin), (x, ymax)], grid))?;
        let (px, py) = chart.backend_coord(&(x, ymin));
        let label = si(x);
        text(
            root,
            (px - 4 * label.len() as i32, py + 8),
            &label,
            1,
            &BLACK,
        );
        x += xstep;
    }
    for (i, c) in curves.iter().enumerate() {
        let pts: Vec<(f64, f64)> = c.points.iter().map(pick).collect();
        chart.draw_series(LineSeries::new(pts.clone(), color(i).stroke_width(2)))?;
        chart.draw_series(pts.iter().map(|&p| Circle::new(p, 4, color(i).filled())))?;
    }
    let (px, py) = chart.backend_coord(&(0.0, ymax));
    let title = if p99 {
        "p99 latency (us)"
    } else {
        "p50 latency (us)"
    };
    text(root, (px, py - 22), title, 2, &BLACK);
    let (ex, ey) = chart.backend_coord(&(xmax, ymin));
    text(
        root,
        (ex - 8 * 22, ey + 22),
        "offered load (ops/s)",
        1,
        &BLACK,
    );
    Ok(())
}
