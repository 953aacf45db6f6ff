package prefetch

//go:noescape
func lines(p *byte, n int)
