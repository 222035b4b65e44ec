module github.com/pendinguploads/pendinguploads/client

go 1.23.0

require (
	github.com/eclipse/paho.mqtt.golang v1.5.0
	github.com/gofrs/flock v0.12.1
	github.com/google/uuid v1.6.0
	golang.org/x/sync v0.10.0
)

require (
	github.com/gorilla/websocket v1.5.3 // indirect
	golang.org/x/net v0.38.0 // indirect
	golang.org/x/sys v0.31.0 // indirect
)
