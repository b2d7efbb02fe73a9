/* What spead2 does with libmlx5.so.1: dlopen it (RTLD_NOW | RTLD_LOCAL), look up the four
 * mlx5dv functions, ask whether the device supports direct verbs. With an argument, opens
 * that file instead and prints dlopen's error. */
#include "util.h"
#include <dlfcn.h>
#include <stdbool.h>

int main(int argc, char **argv)
{
	const char *name = argc > 1 ? argv[1] : "libmlx5.so.1";
	void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
	if (!h) {
		printf("dlopen: %s\n", dlerror());
		return 0;
	}
	bool (*is_supported)(struct ibv_device *) = (bool (*)(struct ibv_device *))dlsym(h, "mlx5dv_is_supported");
	int (*query)(struct ibv_context *, void *) = (int (*)(struct ibv_context *, void *))dlsym(h, "mlx5dv_query_device");
	void *(*create_wq)(struct ibv_context *, void *, void *) =
		(void *(*)(struct ibv_context *, void *, void *))dlsym(h, "mlx5dv_create_wq");
	void *init_obj = dlsym(h, "mlx5dv_init_obj");
	printf("symbols found %d\n", is_supported && query && create_wq && init_obj);
	if (!is_supported || !query || !create_wq) return 1;
	struct ibv_device **list;
	struct ibv_context *ctx = open_first_device(&list);
	if (!ctx) return 1;
	printf("mlx5dv_is_supported(%s) %d\n", ibv_get_device_name(list[0]), is_supported(list[0]));
	static char attrs[512];
	printf("mlx5dv_query_device %s\n", strerror(query(ctx, attrs)));
	errno = 0;
	void *wq = create_wq(ctx, attrs, attrs);
	printf("mlx5dv_create_wq %p %s\n", wq, strerror(errno));
	ibv_close_device(ctx);
	ibv_free_device_list(list);
	dlclose(h);
	return 0;
}
