// Command floor is the trivial CNI plugin of the exec-floor benchmark
// (tests/cnibench): ADD prints a fixed result in the config's cniVersion,
// every other command prints nothing. It does what every plugin must do
// (start, read stdin, decode the config, print JSON) and nothing else, so
// that cnitool running it measures the cost of one plugin exec.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
)

func main() {
	stdin, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(err)
	}
	var conf struct {
		CNIVersion string `json:"cniVersion"`
	}
	if err := json.Unmarshal(stdin, &conf); err != nil {
		fail(err)
	}
	if os.Getenv("CNI_COMMAND") != "ADD" {
		return
	}
	fmt.Printf(`{"cniVersion":%q,"ips":[{"address":"10.0.0.2/24","gateway":"10.0.0.1"}]}`+"\n", conf.CNIVersion)
}

func fail(err error) {
	fmt.Printf(`{"code":100,"msg":%q}`+"\n", err.Error())
	os.Exit(1)
}
