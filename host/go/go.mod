module github.com/gak-kernel/gak/host/go

go 1.19
