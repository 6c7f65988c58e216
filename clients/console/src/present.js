// Turning ledger rows into what the pages show: arguments as JSON Pointer rows (a
// redacted value shown as redacted, never as the marker string), fingerprints as
// "alg:hex", and hourly counts as bar-chart geometry for the server-rendered SVG.

const REDACTED = '[REDACTED]';

function pointerToken(key) {
    return String(key).replace(/~/g, '~0').replace(/\//g, '~1');
}

// Every leaf of a JSON value as { pointer, value, redacted }: the operator sees each
// argument the agent sent, one per line.
export function argumentRows(args) {
    const rows = [];
    const walk = (value, pointer) => {
        if (value !== null && typeof value === 'object') {
            const entries = Array.isArray(value) ? value.map((v, i) => [i, v]) : Object.entries(value);
            if (entries.length === 0) {
                rows.push({ pointer: pointer || '/', value: Array.isArray(value) ? '[]' : '{}', redacted: false });
                return;
            }
            for (const [k, v] of entries) walk(v, pointer + '/' + pointerToken(k));
            return;
        }
        if (value === REDACTED) {
            rows.push({ pointer: pointer || '/', value: null, redacted: true });
        } else {
            rows.push({ pointer: pointer || '/', value: JSON.stringify(value), redacted: false });
        }
    };
    if (args === null || args === undefined) return rows;
    walk(args, '');
    return rows;
}

export function fingerprint(alg, hashHex) {
    if (!hashHex) return null;
    return `${alg || 'unknown'}:${hashHex}`;
}

export function formatTime(t) {
    if (!t) return '';
    const d = t instanceof Date ? t : new Date(t);
    if (Number.isNaN(d.getTime())) return String(t);
    return d.toISOString().replace('T', ' ').replace(/\.\d+Z$/, 'Z');
}

export function formatInterval(v) {
    if (v === null || v === undefined) return '';
    if (typeof v === 'string') return v;
    // pg returns intervals as objects with days/hours/minutes/seconds/milliseconds.
    const parts = [];
    for (const k of ['years', 'months', 'days', 'hours', 'minutes', 'seconds']) {
        if (v[k]) parts.push(`${v[k]} ${k}`);
    }
    if (v.milliseconds && !parts.length) parts.push(`${Math.round(v.milliseconds)} ms`);
    return parts.join(' ') || '0';
}

// One chart: hours along x (oldest left), one or two series as bars side by side.
// Returns plain numbers and labels only; the template draws them (and escapes labels).
export function barChart({ title, hours, series, width = 640, height = 180 }) {
    const left = 40, right = 10, top = 24, bottom = 28;
    const plotW = width - left - right, plotH = height - top - bottom;
    let max = 0;
    for (const s of series) for (const v of s.values) max = Math.max(max, v);
    const niceMax = max <= 4 ? 4 : Math.ceil(max / 4) * 4;
    const slot = plotW / Math.max(hours.length, 1);
    const barW = Math.max(1, (slot - 2) / series.length);
    const bars = [];
    series.forEach((s, si) => {
        s.values.forEach((v, hi) => {
            const h = (v / niceMax) * plotH;
            bars.push({
                x: +(left + hi * slot + 1 + si * barW).toFixed(2),
                y: +(top + plotH - h).toFixed(2),
                w: +barW.toFixed(2),
                h: +h.toFixed(2),
                cls: s.cls,
                label: `${hours[hi].label}: ${v} ${s.name}`,
            });
        });
    });
    const ticks = [0, 1, 2, 3, 4].map((i) => ({
        y: +(top + plotH - (i / 4) * plotH).toFixed(2),
        value: Math.round((i / 4) * niceMax),
    }));
    const xLabels = hours
        .map((h, i) => ({ x: +(left + i * slot + slot / 2).toFixed(2), label: h.short, show: i % 3 === 0 }))
        .filter((l) => l.show);
    const legend = series.map((s, i) => ({ x: left + i * 150, cls: s.cls, name: s.name, total: s.values.reduce((a, b) => a + b, 0) }));
    return { title, width, height, left, top, plotW, plotH, bars, ticks, xLabels, legend, baseline: top + plotH };
}
