package memtable

import "runtime"

func runtimeGosched() { runtime.Gosched() }
