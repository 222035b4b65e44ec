module github.com/pendinguploads/pendinguploads/client

go 1.25.0

require (
	github.com/eclipse/paho.mqtt.golang v1.5.1
	github.com/gofrs/flock v0.13.0
	github.com/google/uuid v1.6.0
	golang.org/x/sync v0.22.0
)

require (
	github.com/gorilla/websocket v1.5.3 // indirect
	golang.org/x/net v0.56.0 // indirect
	golang.org/x/sys v0.46.0 // indirect
)
