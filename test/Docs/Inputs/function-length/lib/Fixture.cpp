// The checker's fixture (function-length.test): braces in comments, strings,
// characters, raw strings and macros do not count; a constructor's
// initializer list, a lambda and a local class belong to their function.
#define OPEN {
namespace a {
namespace {
struct Table {
  int x, y;
};
const Table kTable[] = {{1, 2}, {3, 4}};
} // namespace

class Widget : public Base {
public:
  Widget(int n) : n{n}, name("{") {
    // }
  }
  int get() const override { return n; }

private:
  int n;
  const char *name;
};

template <typename T>
auto twice(T t) -> decltype(t + t) {
  char open = '{';
  const char *text = R"x(}})x";
  auto f = [&](int v) {
    struct Local {
      int z;
    };
    return v;
  };
  return f(t) + t; /* } */
}
} // namespace a

extern "C" int c_entry(void) {
  return 1'000;
}
