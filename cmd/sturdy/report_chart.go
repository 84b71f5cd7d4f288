package main

import (
	"fmt"
	"html"
	"html/template"
	"math"
	"strings"
)

// The charts of every HTML page the tools write: inline SVG with both axes
// and their values, labelled bands (fault episodes, a spike), vertical marks
// (step-downs), reference lines and a legend, so a reader can read numbers
// off the picture and the page needs no scripts, fonts or network. The SVG
// scales to the page width (viewBox), readable from 1 000 to 1 600 px.

// chart is one plot. X is time in seconds unless Categories is set, in
// which case X of a point is the index of its category.
type chart struct {
	Title          string
	XLabel, YLabel string
	Categories     []string // names on the x axis, one per bar group
	Series         []chartSeries
	Bands          []chartBand
	Marks          []chartMark
	Refs           []chartRef
	XMax, YMax     float64 // axis ends; 0 = from the data
}

// chartSeries is a line, or bars: bars of successive series stack on a time
// axis and stand side by side on a category axis.
type chartSeries struct {
	Name   string
	Color  string
	Bars   bool
	Points []chartPoint
}

type chartPoint struct{ X, Y float64 }

// chartBand shades [From, To) on the x axis; bands of one Kind share a
// colour and one legend entry.
type chartBand struct {
	From, To    float64
	Kind, Title string
	Color       string
}

// chartMark is a vertical line at X, such as a step-down.
type chartMark struct {
	X     float64
	Label string
}

// chartRef is a horizontal reference line, such as a server's capacity.
type chartRef struct {
	Y     float64
	Label string
	Color string
}

const (
	chartW, chartH             = 1000, 300
	chartLeft, chartRight      = 70, 20
	chartTop, chartBottom      = 40, 45
	chartPlotW, chartPlotH     = chartW - chartLeft - chartRight, chartH - chartTop - chartBottom
	chartMinLabelledBandPixels = 48
)

// niceStep is a tick step of 1, 2 or 5 × 10^k giving about n ticks up to max.
func niceStep(max float64, n int) float64 {
	if max <= 0 || n <= 0 {
		return 1
	}
	raw := max / float64(n)
	p := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 5, 10} {
		if raw <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// tickLabel prints v with no more decimals than the step needs.
func tickLabel(v, step float64) string {
	if step >= 1 {
		return fmt.Sprintf("%.0f", v)
	}
	d := int(math.Ceil(-math.Log10(step)))
	return fmt.Sprintf("%.*f", d, v)
}

// axisEnds returns the axes' maxima: the chart's own or the data's, rounded
// up to a whole tick.
func (c *chart) axisEnds() (xMax, yMax, xStep, yStep float64) {
	xMax, yMax = c.XMax, c.YMax
	stacked := map[float64]float64{}
	for _, s := range c.Series {
		for _, p := range s.Points {
			xMax = math.Max(xMax, p.X)
			y := p.Y
			if s.Bars && c.Categories == nil {
				stacked[p.X] += p.Y
				y = stacked[p.X]
			}
			yMax = math.Max(yMax, y)
		}
	}
	for _, b := range c.Bands {
		xMax = math.Max(xMax, b.To)
	}
	for _, r := range c.Refs {
		yMax = math.Max(yMax, r.Y)
	}
	if c.Categories != nil {
		xMax = float64(len(c.Categories))
	}
	if xMax <= 0 {
		xMax = 1
	}
	if yMax <= 0 {
		yMax = 1
	}
	yStep = niceStep(yMax, 5)
	yMax = math.Ceil(yMax/yStep) * yStep
	xStep = niceStep(xMax, 10)
	if c.Categories == nil {
		xMax = math.Ceil(xMax/xStep) * xStep
	}
	return xMax, yMax, xStep, yStep
}

// SVG draws the chart.
func (c chart) SVG() template.HTML {
	xMax, yMax, xStep, yStep := c.axisEnds()
	px := func(x float64) float64 { return chartLeft + x/xMax*chartPlotW }
	py := func(y float64) float64 { return chartTop + chartPlotH - y/yMax*chartPlotH }
	var b strings.Builder
	esc := html.EscapeString
	fmt.Fprintf(&b, `<svg class="chart" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s">`, chartW, chartH, esc(c.Title))
	var labels strings.Builder // drawn over the data
	for _, band := range c.Bands {
		x0, x1 := px(band.From), px(math.Max(band.To, band.From+xMax/chartPlotW))
		fmt.Fprintf(&b, `<rect class="band" x="%.1f" y="%d" width="%.1f" height="%d" fill="%s"><title>%s</title></rect>`,
			x0, chartTop, x1-x0, chartPlotH, band.Color, esc(band.Title))
		if x1-x0 >= chartMinLabelledBandPixels {
			fmt.Fprintf(&labels, `<text class="band-label" x="%.1f" y="%d">%s</text>`, x0+2, chartTop+12, esc(band.Kind))
		}
	}
	c.drawAxes(&b, px, py, xMax, yMax, xStep, yStep)
	c.drawSeries(&b, px, py, xMax)
	b.WriteString(labels.String())
	for _, r := range c.Refs {
		fmt.Fprintf(&b, `<line class="ref" x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="%s" stroke-dasharray="5 3"/>`,
			chartLeft, chartLeft+chartPlotW, py(r.Y), py(r.Y), r.Color)
		fmt.Fprintf(&b, `<text x="%d" y="%.1f" text-anchor="end">%s</text>`, chartLeft+chartPlotW, py(r.Y)-3, esc(r.Label))
	}
	for _, m := range c.Marks {
		fmt.Fprintf(&b, `<line class="mark" x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#222" stroke-width="1.5"><title>%s</title></line>`,
			px(m.X), px(m.X), chartTop, chartTop+chartPlotH, esc(m.Label))
	}
	c.drawLegend(&b)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

func (c chart) drawAxes(b *strings.Builder, px, py func(float64) float64, xMax, yMax, xStep, yStep float64) {
	bottom := chartTop + chartPlotH
	fmt.Fprintf(b, `<g class="axis y-axis">`)
	for y := 0.0; y <= yMax+yStep/2; y += yStep {
		fmt.Fprintf(b, `<line x1="%d" x2="%d" y1="%.1f" y2="%.1f" stroke="#e4e4e4"/>`, chartLeft, chartLeft+chartPlotW, py(y), py(y))
		fmt.Fprintf(b, `<text class="tick" x="%d" y="%.1f" text-anchor="end">%s</text>`, chartLeft-6, py(y)+4, tickLabel(y, yStep))
	}
	fmt.Fprintf(b, `<text class="axis-label" transform="translate(14 %d) rotate(-90)" text-anchor="middle">%s</text></g>`,
		chartTop+chartPlotH/2, html.EscapeString(c.YLabel))
	fmt.Fprintf(b, `<g class="axis x-axis"><line x1="%d" x2="%d" y1="%d" y2="%d" stroke="#666"/>`, chartLeft, chartLeft+chartPlotW, bottom, bottom)
	if c.Categories != nil {
		every := (len(c.Categories) + 24) / 25 // at most 25 names, so they do not overlap
		for i, name := range c.Categories {
			if i%every != 0 {
				continue
			}
			fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>`, px(float64(i)+0.5), bottom+16, html.EscapeString(name))
		}
	} else {
		for x := 0.0; x <= xMax+xStep/2; x += xStep {
			fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%d" stroke="#666"/>`, px(x), px(x), bottom, bottom+4)
			fmt.Fprintf(b, `<text class="tick" x="%.1f" y="%d" text-anchor="middle">%s</text>`, px(x), bottom+16, tickLabel(x, xStep))
		}
	}
	fmt.Fprintf(b, `<text class="axis-label" x="%d" y="%d" text-anchor="middle">%s</text></g>`,
		chartLeft+chartPlotW/2, chartH-6, html.EscapeString(c.XLabel))
}

func (c chart) drawSeries(b *strings.Builder, px, py func(float64) float64, xMax float64) {
	var bars []chartSeries
	for _, s := range c.Series {
		if s.Bars {
			bars = append(bars, s)
		}
	}
	stacked := map[float64]float64{}
	for i, s := range bars {
		for _, p := range s.Points {
			var x0, w, base float64
			if c.Categories != nil { // side by side within the category
				slot := 0.8 / float64(len(bars))
				x0, w = px(p.X+0.1+slot*float64(i)), slot*chartPlotW/xMax
			} else { // stacked, one bar per x unit
				x0, w = px(p.X), math.Max(1, 0.8*chartPlotW/xMax)
				base = stacked[p.X]
				stacked[p.X] += p.Y
			}
			y0, y1 := py(base), py(base+p.Y)
			fmt.Fprintf(b, `<rect class="bar" x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s"><title>%s: %s</title></rect>`,
				x0, y1, w, y0-y1, s.Color, html.EscapeString(s.Name), trimFloat(p.Y))
			if c.Categories != nil && len(c.Categories) <= 12 {
				fmt.Fprintf(b, `<text class="value" x="%.1f" y="%.1f" text-anchor="middle">%s</text>`, x0+w/2, y1-3, trimFloat(p.Y))
			}
		}
	}
	for _, s := range c.Series {
		if s.Bars || len(s.Points) == 0 {
			continue
		}
		var pts strings.Builder
		for _, p := range s.Points {
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(p.X), py(p.Y))
		}
		fmt.Fprintf(b, `<polyline class="line" fill="none" stroke="%s" stroke-width="1.8" points="%s"><title>%s</title></polyline>`,
			s.Color, strings.TrimSpace(pts.String()), html.EscapeString(s.Name))
	}
}

// drawLegend lists the series, the band kinds, the marks and the reference
// lines above the plot.
func (c chart) drawLegend(b *strings.Builder) {
	x := float64(chartLeft)
	item := func(color, name string, line bool) {
		if line {
			fmt.Fprintf(b, `<line x1="%.1f" x2="%.1f" y1="14" y2="14" stroke="%s" stroke-width="2"/>`, x, x+14, color)
		} else {
			fmt.Fprintf(b, `<rect x="%.1f" y="8" width="14" height="12" fill="%s"/>`, x, color)
		}
		fmt.Fprintf(b, `<text class="legend" x="%.1f" y="18">%s</text>`, x+18, html.EscapeString(name))
		x += 30 + 6.5*float64(len(name))
	}
	b.WriteString(`<g class="legend-box">`)
	for _, s := range c.Series {
		item(s.Color, s.Name, !s.Bars)
	}
	seen := map[string]bool{}
	for _, band := range c.Bands {
		if !seen[band.Kind] {
			seen[band.Kind] = true
			item(band.Color, band.Kind, false)
		}
	}
	if len(c.Marks) > 0 {
		item("#222", c.Marks[0].Label, true)
	}
	for _, r := range c.Refs {
		item(r.Color, r.Label, true)
	}
	b.WriteString(`</g>`)
}

// trimFloat prints v without trailing zeros.
func trimFloat(v float64) string {
	s := fmt.Sprintf("%.2f", v)
	s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	return s
}

// pageStyle is the style every page shares.
const pageStyle = `body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1200px;padding:0 1.5em;color:#222}
table{border-collapse:collapse;margin-bottom:1.5em}td,th{border:1px solid #ccc;padding:.3em .6em;text-align:right}
td:first-child,th:first-child{text-align:left}.bad{background:#fde2e1}.good{background:#e3f6e3}
svg.chart{display:block;max-width:100%;margin-bottom:1.5em;font-size:12px}svg .tick,svg .legend{fill:#333}
svg .axis-label{fill:#222;font-weight:600}svg .band-label{fill:#555;font-size:10px}svg .value{font-size:11px}`
