module github.com/bloomkv/bloomkv

go 1.25
