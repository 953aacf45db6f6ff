//go:build !amd64

package prefetch

func lines(p *byte, n int) {}
