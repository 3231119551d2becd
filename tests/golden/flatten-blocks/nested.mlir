"builtin.module"() ({
  "netc.network"() ({
    %data = "netc.input"() {name = "data", dtype = "f32", shape = [2, 8, 8, 4]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/nested.nd":4:9)
    %outer.a = "netc.conv2d"() {name = "outer/a", filter = [1, 1, 4, 8], parents = ["data"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/nested.nd":6:5)
    %outer.inner.x = "netc.conv2d"() {name = "outer/inner/x", filter = [3, 3, 8, 8], parents = ["outer/a"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/nested.nd":8:7)
    %outer.inner.y = "netc.relu"() {name = "outer/inner/y", parents = ["outer/inner/x"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/nested.nd":9:7)
    %outer.inherit.z = "netc.conv2d"() {name = "outer/inherit/z", filter = [1, 1, 4, 8], parents = ["data"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/nested.nd":12:7)
    %outer.cat = "netc.concat"() {name = "outer/cat", parents = ["outer/inner/y", "outer/inherit/z"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/nested.nd":14:5)
    %out = "netc.relu"() {name = "out", parents = ["outer/cat"]} : () -> tensor<*xf32> loc("tests/golden/flatten-blocks/nested.nd":16:3)
  }) {sym_name = "net"} : () -> () loc("tests/golden/flatten-blocks/nested.nd":3:9)
}) {source = "tests/golden/flatten-blocks/nested.nd"} : () -> () loc("tests/golden/flatten-blocks/nested.nd":1:1)
