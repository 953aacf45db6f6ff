//go:build !race

package bloomkv

const raceBuild = false
