package console

import (
	"fmt"
	"time"

	"github.com/intentjobs/jobs"
	"github.com/intentjobs/jobs/inspect"
)

// The providers page draws its charts as SVG on the server: no script, no
// style attribute, only presentation attributes that the
// Content-Security-Policy allows.

const (
	chartW, chartH = 480.0, 120.0
	chartPad       = 4.0
)

type providersData struct {
	Report    inspect.ProvidersReport
	Providers []providerView
	Now       time.Time
	Scoped    bool
}

type providerView struct {
	inspect.ProviderReport
	Verifications []verificationView
	Bars          []bar   // outcomes per bucket, stacked
	Latency       string  // the latency polyline's points
	LatencyMax    string  // the top of the latency chart
	Rates         [3]rate // succeeded, failed, in doubt over the window
	Width, Height float64
}

type verificationView struct {
	jobs.Verification
	Eligible bool
}

type bar struct {
	X, W     float64
	Segments []segment
	Title    string
}

type segment struct {
	Y, H  float64
	Class string
}

type rate struct {
	Name  string
	Share float64
	N     int
}

func (h *Handler) providersView(rep inspect.ProvidersReport, p Principal) providersData {
	now := h.o.Manager.Now()
	d := providersData{Report: rep, Now: now}
	for _, pr := range rep.Providers {
		v := providerView{ProviderReport: pr, Width: chartW, Height: chartH}
		for _, ver := range pr.Verifications {
			v.Verifications = append(v.Verifications, verificationView{ver, ver.Valid(now)})
		}
		most := 1
		var slowest time.Duration
		for _, b := range pr.Buckets {
			most = max(most, b.Attempts())
			slowest = max(slowest, b.Latency)
		}
		n := float64(len(pr.Buckets))
		bw := (chartW - 2*chartPad) / n
		var points string
		for i, b := range pr.Buckets {
			x := chartPad + float64(i)*bw
			br := bar{X: x + 1, W: max(bw-2, 1), Title: fmt.Sprintf("from %s: %d attempts, %d succeeded, %d failed, %d cancelled, %d in doubt, %d running",
				stamp(b.Start), b.Attempts(), b.Succeeded, b.Failed, b.Cancelled, b.InDoubt, b.Running)}
			y := chartH - chartPad
			for _, s := range []struct {
				n     int
				class string
			}{{b.Succeeded, "ok"}, {b.Failed, "bad"}, {b.Cancelled, "cancelled"}, {b.InDoubt, "doubt"}, {b.Running, "info"}} {
				if s.n == 0 {
					continue
				}
				hgt := float64(s.n) / float64(most) * (chartH - 2*chartPad)
				y -= hgt
				br.Segments = append(br.Segments, segment{Y: y, H: hgt, Class: s.class})
			}
			v.Bars = append(v.Bars, br)
			if slowest > 0 && b.Latency > 0 {
				ly := chartH - chartPad - float64(b.Latency)/float64(slowest)*(chartH-2*chartPad)
				points += fmt.Sprintf("%.1f,%.1f ", x+bw/2, ly)
			}
		}
		v.Latency = points
		v.LatencyMax = ago(slowest)
		t := pr.Total
		v.Rates = [3]rate{{"succeeded", t.Rate(t.Succeeded), t.Succeeded}, {"failed", t.Rate(t.Failed), t.Failed},
			{"in doubt", t.Rate(t.InDoubt), t.InDoubt}}
		d.Providers = append(d.Providers, v)
	}
	return d
}
