package server_test

import (
	"context"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionv1 "google.golang.org/grpc/reflection/grpc_reflection_v1"
	reflectionv1alpha "google.golang.org/grpc/reflection/grpc_reflection_v1alpha"

	"github.com/prefixgate/prefixgate/internal/server"
)

// TestHealthAndReflection does what `grpcurl list` and
// `grpcurl grpc.health.v1.Health/Check` do, with grpc-go's own clients.
func TestHealthAndReflection(t *testing.T) {
	base := startRouter(t, 1, server.Config{})
	conn, err := grpc.NewClient(strings.TrimPrefix(base, "http://"), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx := context.Background()

	for _, svc := range []string{"", "prefixgate.v1.InferenceService"} {
		res, err := healthpb.NewHealthClient(conn).Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
		if err != nil {
			t.Fatalf("health %q: %v", svc, err)
		}
		if res.GetStatus() != healthpb.HealthCheckResponse_SERVING {
			t.Errorf("health %q = %v; want SERVING", svc, res.GetStatus())
		}
	}

	want := []string{"prefixgate.v1.AdminService", "prefixgate.v1.InferenceService", "prefixgate.v1.NormalizeService"}
	stream, err := reflectionv1.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	res, err := stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, s := range res.GetListServicesResponse().GetService() {
		got = append(got, s.GetName())
	}
	for _, w := range want {
		if !slices.Contains(got, w) {
			t.Errorf("reflection v1 lists %v; want %s among them", got, w)
		}
	}
	// The file that defines a service, as grpcurl describe asks for it.
	if err := stream.Send(&reflectionv1.ServerReflectionRequest{MessageRequest: &reflectionv1.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "prefixgate.v1.InferenceService"}}); err != nil {
		t.Fatal(err)
	}
	res, err = stream.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if len(res.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("no file descriptor for prefixgate.v1.InferenceService: %v", res)
	}
	stream.CloseSend()

	alpha, err := reflectionv1alpha.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := alpha.Send(&reflectionv1alpha.ServerReflectionRequest{MessageRequest: &reflectionv1alpha.ServerReflectionRequest_ListServices{}}); err != nil {
		t.Fatal(err)
	}
	ares, err := alpha.Recv()
	if err != nil {
		t.Fatal(err)
	}
	if n := len(ares.GetListServicesResponse().GetService()); n < 3 {
		t.Errorf("reflection v1alpha lists %d services; want at least 3", n)
	}
	alpha.CloseSend()
}
