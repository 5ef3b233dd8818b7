package sim

// WritePlots writes SVG charts into dir.
func (r *Report) WritePlots(dir string) error { return nil }
