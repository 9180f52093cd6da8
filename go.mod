module github.com/vkllm/vkllm

go 1.26.8

require (
	github.com/fasthttp/router v1.5.4
	github.com/goki/vulkan v1.0.8
	github.com/santhosh-tekuri/jsonschema/v6 v6.0.2
	github.com/valyala/fasthttp v1.70.0
	golang.org/x/text v0.34.0
)

require (
	github.com/andybalholm/brotli v1.2.1 // indirect
	github.com/go-json-experiment/json v1.27.2 // indirect
	github.com/klauspost/compress v1.18.5 // indirect
	github.com/savsgio/gotils v0.0.0-20240704082632-aef3928b8a38 // indirect
	github.com/valyala/bytebufferpool v1.0.0 // indirect
)
