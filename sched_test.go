package bloomkv

import "runtime"

func runtimeGosched() { runtime.Gosched() }
